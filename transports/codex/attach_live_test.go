package codex

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
)

// TestLiveAttachCommandResumesTheThread runs the descriptor's attach
// command with the environment AttachEnv adds, as `codex exec resume` (the
// non-interactive form of `codex resume`), for a session whose CODEX_HOME
// is the daemon's per-session folder: the model's request carries the
// session's earlier turn. With HOME alone (what attach printed before)
// codex answers "no rollout found for thread id".
func TestLiveAttachCommandResumesTheThread(t *testing.T) {
	m := startMock(t, &modelmock.Scenario{})
	bin := codexBinary(t)
	tr := New(WithBinary(bin), WithHomeRoot(t.TempDir()))
	ws := t.TempDir()
	rec := newRecorder()
	spec := transports.SessionSpec{SessionID: "cs_attach", Cwd: ws, Model: mockModel, Posture: messages.PostureDefault, Env: mockEnv(m)}
	ss, err := tr.Open(ctxT(t), spec, rec.sink)
	if err != nil {
		t.Fatal(err)
	}
	s := ss.(*Session)
	if err := s.StartTurn(ctxT(t), 1, "remember the word marmalade"); err != nil {
		t.Fatal(err)
	}
	rec.turnEnd(t, 1)
	thread := s.ThreadID()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	env := tr.AttachEnv(spec)
	if len(env) != 1 || !strings.HasPrefix(env[0], "CODEX_HOME=") || !strings.HasSuffix(env[0], "/cs_attach") {
		t.Fatalf("AttachEnv %q: want the session's own CODEX_HOME", env)
	}
	argv := strings.Fields(strings.ReplaceAll(descriptor().ExternalAttach.CommandTemplate, "{sessionId}", thread))
	if len(argv) != 3 || argv[1] != "resume" {
		t.Fatalf("attach template %q: want `codex resume {sessionId}`", descriptor().ExternalAttach.CommandTemplate)
	}
	// exec mode asks for a git repository unless told not to; the TUI asks
	// the person instead
	cmd := exec.CommandContext(ctxT(t), bin, "exec", "resume", "--skip-git-repo-check", argv[2], "what was the word")
	cmd.Dir = ws
	cmd.Env = append(append(os.Environ(), env...), EnvAPIKey+"=sk-mock")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s exec resume %s: %v\n%s", bin, argv[2], err, out)
	}
	mt := lastMeta(t, m)
	if !strings.Contains(mt.Body, "marmalade") || !strings.Contains(mt.Body, "what was the word") {
		t.Errorf("the attach command's request does not carry turn 1: the thread was not resumed\n%s", out)
	}
}
