package acptest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/modelmock"
)

// AttachRun checks b's attach command against its real CLI: a session
// runs turn 1 ("remember the word marmalade") and closes; then the
// descriptor's ExternalAttach template, filled with the session's id and
// workspace, runs with its binary replaced by b.Bin and made
// non-interactive by headless (which gets the template's argv and the
// prompt and returns the argv to run), in the workspace with the session's
// HOME and spec environment plus env. The model's request must carry turn
// 1: the command resumed the session's conversation.
func AttachRun(t *testing.T, b Backend, headless func(argv []string, prompt string) []string, env ...string) {
	t.Helper()
	tmpl := b.New().Descriptor().ExternalAttach
	if tmpl == nil || tmpl.CommandTemplate == "" {
		t.Fatal("the descriptor has no attach command")
	}
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "marmalade"}, Steps: []modelmock.Step{{Text: "Noted."}}},
		{Match: modelmock.Match{Text: "what was the word"}, Steps: []modelmock.Step{{Text: "It was marmalade."}}},
	}}
	l := OpenLive(t, b, sc, "", messages.PostureDefault)
	l.Turn(1, "remember the word marmalade", nil)
	st, ok := l.Rec.Started()
	if !ok || st.ExternalSessionID == "" {
		t.Fatal("the session reported no external session id")
	}
	if err := l.S.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	argv := strings.Fields(strings.NewReplacer("{sessionId}", st.ExternalSessionID, "{cwd}", l.WS).Replace(tmpl.CommandTemplate))
	argv = headless(argv, "what was the word")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute) // stops a hang only
	defer cancel()
	cmd := exec.CommandContext(ctx, b.Bin, argv[1:]...)
	cmd.Dir = l.WS
	spec := b.Spec(t, l.Mock)
	cmd.Env = append(append(append(os.Environ(), "HOME="+spec.Home), spec.Env...), env...)
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%q: %v\n%s", argv, err, out)
	}
	reqs := l.Mock.MainRequests()
	if len(reqs) == 0 {
		t.Fatal("the model saw no request")
	}
	last := string(reqs[len(reqs)-1].Body)
	if !strings.Contains(last, "what was the word") || !strings.Contains(last, "remember the word marmalade") {
		t.Errorf("%q: the model's request does not carry turn 1: the session was not resumed\n%s\n%.3000s", argv, out, last)
	}
}
