package codex

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

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

// A pool sweeps what pools of dead runtimes left: CODEX_HOMEs whose
// app-server's group is gone, boots that never finished (after the grace),
// adoption links of gone processes; never a home whose group runs, one
// still booting, or a session's CODEX_HOME.
func TestSweepWarmHomes(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) *exec.Cmd {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, cmd.Start())
		return cmd
	}
	ended := run("true")
	require.NoError(t, ended.Wait())
	dead := ended.Process.Pid
	live := run("sleep", "300")
	t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })
	home := func(name string, owner int) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(p, 0o700))
		if owner != 0 {
			require.NoError(t, os.WriteFile(filepath.Join(p, ownerFile), []byte(strconv.Itoa(owner)+"\n"), 0o600))
		}
		return p
	}
	home(".warm-dead", dead)
	home(".warm-live", live.Process.Pid)
	home(".warm-booting", 0)
	stale := home(".warm-stale", 0)
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(stale, old, old))
	home("cs_adopted", dead)
	require.NoError(t, os.Symlink(filepath.Join(dir, "cs_adopted"), filepath.Join(dir, ".warm-adopted")))
	home("cs_running", live.Process.Pid)
	require.NoError(t, os.Symlink(filepath.Join(dir, "cs_running"), filepath.Join(dir, ".warm-running")))
	require.NoError(t, os.Symlink(filepath.Join(dir, "cs_removed"), filepath.Join(dir, ".warm-dangling")))
	home("cs_plain", dead)

	sweepWarmHomes(dir, time.Minute, time.Now())
	assert.Equal(t, []string{".warm-booting", ".warm-live", ".warm-running", "cs_adopted", "cs_plain", "cs_running"}, entries(t, dir))
}
