package acptest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
)

// AttachRun checks b's attach command against its real CLI: a session
// runs turn 1 ("remember the word marmalade") and closes; then the
// descriptor's ExternalAttach template, filled with the session's id and
// workspace, runs with its binary replaced by b.Bin and made
// non-interactive by headless (which gets the template's argv, the prompt
// and the session's spec, and returns the argv to run and the environment
// a user's own setup would add), in the workspace with the session's HOME
// and spec environment. The model's request must carry turn 1: the command
// resumed the session's conversation.
func AttachRun(t *testing.T, b Backend, headless func(argv []string, prompt string, spec transports.SessionSpec) (args, env []string)) {
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
	spec := b.Spec(t, l.Mock)
	argv, env := headless(argv, "what was the word", spec)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // stops a hang only
	defer cancel()
	cmd := exec.CommandContext(ctx, b.Bin, argv[1:]...)
	cmd.Dir = l.WS
	cmd.Env = append(append(append(os.Environ(), "HOME="+spec.Home), spec.Env...), env...)
	cmd.Stdin = strings.NewReader("")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // stopped as a group
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out strings.Builder
	lw := &lockedWriter{w: &out}
	cmd.Stdout, cmd.Stderr = lw, lw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// the verdict is the model's request; a CLI that stays up after
	// answering (opencode run on the mock) is stopped once it was sent
	var err error
	var reqs []modelmock.Request
	for done := false; !done; {
		select {
		case err = <-exited:
			done = true
		case <-time.After(200 * time.Millisecond):
			reqs = l.Mock.MainRequests()
			if n := len(reqs); n > 0 && strings.Contains(string(reqs[n-1].Body), "what was the word") {
				time.Sleep(time.Second) // let it take the answer
				_ = cmd.Cancel()
				<-exited
				done = true
			}
		}
	}
	reqs = l.Mock.MainRequests()
	if err != nil {
		t.Fatalf("%q: %v (the model saw %d requests)\n%s", argv, err, len(reqs), lw.String())
	}
	if len(reqs) == 0 {
		t.Fatal("the model saw no request")
	}
	last := string(reqs[len(reqs)-1].Body)
	if !strings.Contains(last, "what was the word") || !strings.Contains(last, "remember the word marmalade") {
		t.Errorf("%q: the model's request does not carry turn 1: the session was not resumed\n%s\n%.3000s", argv, lw.String(), last)
	}
}

// lockedWriter serializes the CLI's stdout and stderr into one buffer.
type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
