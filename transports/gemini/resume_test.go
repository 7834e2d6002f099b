package gemini

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/acp/acptest"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/transporttest"
)

// TestLoadWait: a load in the minute the session's chat file was created
// waits until just past that minute; any other minute loads at once.
func TestLoadWait(t *testing.T) {
	home := t.TempDir()
	chats := filepath.Join(home, ".gemini", "tmp", "proj", "chats")
	if err := os.MkdirAll(chats, 0o700); err != nil {
		t.Fatal(err)
	}
	id := "f54f79c6-08f2-4b3d-b704-c68cb0657b01"
	if err := os.WriteFile(filepath.Join(chats, "session-2026-12-06T04-15-f54f79c6.jsonl"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		name string
		home string
		id   string
		now  time.Time
		want time.Duration
	}{
		{"same minute", home, id, at("2026-12-06T04:15:20Z"), 41 * time.Second},
		{"same minute, another zone", home, id, at("2026-12-06T05:15:50+01:00"), 11 * time.Second},
		{"next minute", home, id, at("2026-12-06T04:16:00Z"), 0},
		{"another session", home, "0123abcd-0000", at("2026-12-06T04:15:20Z"), 0},
		{"no home", "", id, at("2026-12-06T04:15:20Z"), 0},
		{"short id", home, "f54f", at("2026-12-06T04:15:20Z"), 0},
	} {
		if got := loadWait(c.home, c.id, c.now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestLiveResumeAfterKillKeepsTheConversation: the gemini process is
// SIGKILLed after turn 1; a session resumed from its id (session/load)
// sends turn 1 with turn 2 to the model. Before, the resume either failed
// ("No previous sessions found for this project", within the session's
// first minute) or was not offered and started a new conversation.
func TestLiveResumeAfterKillKeepsTheConversation(t *testing.T) {
	b := backend(t)
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Text: "marmalade"}, Steps: []modelmock.Step{{Text: "Noted."}}},
		{Match: modelmock.Match{Text: "what was the word"}, Steps: []modelmock.Step{{Text: "It was marmalade."}}},
	}}
	l := acptest.OpenLive(t, b, sc, "", messages.PostureDefault)
	l.Turn(1, "remember the word marmalade", nil)
	st, ok := l.Rec.Started()
	if !ok || st.ExternalSessionID == "" {
		t.Fatal("no external session id")
	}
	pid := l.S.(interface{ Pid() int }).Pid()
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = l.S.Close(context.Background())

	tr := b.New(acptest.Options(acp.WithBinary(b.Bin))...)
	spec := b.Spec(t, l.Mock)
	spec.Cwd, spec.ResumeExternalID, spec.Posture = l.WS, st.ExternalSessionID, messages.PostureDefault
	rec := transporttest.NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := tr.Open(ctx, spec, rec.Sink)
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	defer s.Close(context.Background())
	second := &acptest.Live{T: t, Mock: l.Mock, Rec: rec, S: s, WS: l.WS}
	evs := second.Turn(2, "what was the word", nil)
	if acptest.Count(evs, messages.EvTurnEnd) != 1 {
		t.Fatalf("turn 2 did not complete\n%s", rec.Transcript())
	}
	reqs := l.Mock.MainRequests()
	if len(reqs) == 0 {
		t.Fatal("the model saw no request")
	}
	last := string(reqs[len(reqs)-1].Body)
	if !strings.Contains(last, "what was the word") || !strings.Contains(last, "remember the word marmalade") {
		t.Errorf("the first request after the resume does not carry turn 1:\n%.2000s", last)
	}
}

// TestLiveAttachCommandResumes runs the attach command headless (-p): the
// model's request carries the session's turn 1. A user settings file in
// the session's HOME selects the API-key auth, as a user's own would (a
// system settings file under /tmp is refused as insecure), for this test
// only.
func TestLiveAttachCommandResumes(t *testing.T) {
	settings := filepath.Join(acptest.SharedHome, ".gemini", "settings.json")
	if _, err := os.Stat(settings); err == nil {
		t.Fatalf("%s exists: the test would overwrite it", settings)
	}
	acptest.AttachRun(t, backend(t), func(argv []string, prompt string, _ transports.SessionSpec) ([]string, []string) {
		if err := os.WriteFile(settings, []byte(`{"security":{"auth":{"selectedType":"gemini-api-key"}}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(settings) })
		return append(argv, "-p", prompt), []string{"GEMINI_CLI_TRUST_WORKSPACE=true"}
	})
}
