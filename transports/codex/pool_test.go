package codex

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	prockit "github.com/codesession/codesession/transports/proc"
)

// The key holds what makes two app-servers not interchangeable and nothing
// a start applies at adoption; a start whose CODEX_HOME is there already,
// or that resumes a thread, never adopts.
func TestWarmKey(t *testing.T) {
	root := t.TempDir()
	kit, err := prockit.NewKit(t.TempDir(), "rt-a")
	require.NoError(t, err)
	other, err := prockit.NewKit(t.TempDir(), "rt-b")
	require.NoError(t, err)
	tr := New(WithHomeRoot(root))
	base := transports.SessionSpec{SessionID: "cs_1", Cwd: "/work/a", Model: "gpt-5.5", Posture: messages.PostureDefault,
		Procs: kit.Group("cs_1"), Env: []string{EnvBaseURL + "=http://127.0.0.1:1/v1"}}
	key := func(spec transports.SessionSpec, bin string) warmKey {
		k, _, _ := tr.warmKey(spec, bin)
		return k
	}
	k0 := key(base, "/bin/codex")

	same := map[string]func(*transports.SessionSpec){
		"session id":    func(s *transports.SessionSpec) { s.SessionID, s.Procs = "cs_2", kit.Group("cs_2") },
		"model":         func(s *transports.SessionSpec) { s.Model = "gpt-5.4" },
		"effort":        func(s *transports.SessionSpec) { s.Effort = messages.EffortHigh },
		"posture":       func(s *transports.SessionSpec) { s.Posture = messages.PostureFull },
		"system prompt": func(s *transports.SessionSpec) { s.AppendSystemPrompt = "be brief" },
	}
	for name, f := range same {
		s := base
		f(&s)
		assert.Equal(t, k0, key(s, "/bin/codex"), "%s is applied at adoption, not part of the key", name)
	}
	differ := map[string]func(*transports.SessionSpec){
		"cwd":        func(s *transports.SessionSpec) { s.Cwd = "/work/b" },
		"env":        func(s *transports.SessionSpec) { s.Env = []string{EnvBaseURL + "=http://127.0.0.1:2/v1"} },
		"home":       func(s *transports.SessionSpec) { s.Home = t.TempDir() },
		"codex home": func(s *transports.SessionSpec) { s.Env = append(s.Env, "CODEX_HOME="+t.TempDir()) },
		"kit":        func(s *transports.SessionSpec) { s.Procs = other.Group("cs_1") },
	}
	for name, f := range differ {
		s := base
		f(&s)
		assert.NotEqual(t, k0, key(s, "/bin/codex"), "%s makes processes not interchangeable", name)
	}
	assert.NotEqual(t, k0, key(base, "/opt/codex"), "the binary")

	_, target, ok := tr.warmKey(base, "/bin/codex")
	assert.True(t, ok)
	assert.Equal(t, filepath.Join(root, "cs_1"), target, "the adopter's CODEX_HOME is where a cold start puts it")
	require.NoError(t, os.MkdirAll(target, 0o700))
	_, _, ok = tr.warmKey(base, "/bin/codex")
	assert.False(t, ok, "a CODEX_HOME that exists holds threads: never replaced by a pooled one")
	resume := base
	resume.SessionID, resume.ResumeExternalID = "cs_3", "thread-1"
	_, _, ok = tr.warmKey(resume, "/bin/codex")
	assert.False(t, ok, "a resume opens its thread on its own process")
	own := base
	own.Env = append(own.Env, "CODEX_HOME="+t.TempDir())
	k, target, ok := tr.warmKey(own, "/bin/codex")
	assert.True(t, ok && k.own && target == "", "the user's CODEX_HOME is used as is, by pooled processes too")
}
