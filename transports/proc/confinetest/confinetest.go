// Package confinetest is the one live check of whole-agent confinement
// every real CLI backend runs: the backend contained the way the runtime
// contains it (contain.Wrap with a process kit), a founder credential in
// the daemon's environment refusing the start, no daemon variable off the
// allowlist in any of the session's processes, and the model's shell
// failing to write outside the workspace, to read a planted ~/.ssh key and
// to escape through a setsid grandchild, while a write inside works and
// the session takes another turn.
package confinetest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/contain"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/proc"
	"github.com/codesession/codesession/transports/proc/proctest"
)

// Case is one backend's live confinement check.
type Case struct {
	// Transport is the backend, not yet contained, with its real binary.
	Transport transports.Transport
	// Mock is the model server the session talks to; its scenario makes
	// ShellPrompt(cmd) call the agent's shell tool with cmd, and answers
	// "say pong" with text.
	Mock *modelmock.Server
	// Spec is the session (Env pointing at Mock); Cwd is set here, and Home
	// when Spec has none (the planted key goes under Home/.ssh).
	Spec transports.SessionSpec
	// ShellPrompt is the prompt that runs cmd through the agent's shell.
	ShellPrompt func(cmd string) string
	// Answer, when set, answers a clarification the shell call raises.
	Answer bool
	// ReadsOpen: the backend declares ListsHome, so the planted key is
	// readable (only writes are confined); the check asserts that it is
	// reported so rather than that the read fails.
	ReadsOpen bool
	// Network runs the session at network: model-only (the model port comes
	// from Spec.Env's *_BASE_URL) and has the shell try a loopback port
	// that is not allowed, which must fail while the session works.
	Network bool
	// Loopback runs it at network: loopback instead (the session's own
	// network namespace, where the model endpoint on the host's loopback
	// is relayed), and the shell also tries the model's own port on
	// another loopback address, which the port rules alone let through
	// and the namespace must not.
	Loopback bool
}

// NeedLandlock skips without Landlock, and fails under CI=true.
func NeedLandlock(t *testing.T) {
	t.Helper()
	if proc.LandlockABI() >= 1 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Landlock on this kernel: CI must run the confinement tests")
	}
	t.Skip("no Landlock on this kernel")
}

type recorder struct {
	mu  sync.Mutex
	evs []messages.Event
	tn  []int
}

func (r *recorder) sink(turn int, ev messages.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs, r.tn = append(r.evs, ev), append(r.tn, turn)
}

func (r *recorder) find(turn int, match func(messages.Event) bool) (messages.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, ev := range r.evs {
		if r.tn[i] == turn && match(ev) {
			return ev, true
		}
	}
	return messages.Event{}, false
}

func (r *recorder) dump() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for i, ev := range r.evs {
		b.WriteString(string(ev.Type) + " [" + ev.ToolName + "] " + ev.Text + ev.Output)
		b.WriteString(" (turn " + string(rune('0'+r.tn[i]%10)) + ")\n")
	}
	return b.String()
}

// turnEnd waits (bounded, only to stop a hang) for turn's end, answering
// clarifications allow-once when answer is set.
func (r *recorder) turnEnd(t *testing.T, sess transports.Session, turn int, answer bool) messages.Event {
	t.Helper()
	answered := map[string]bool{}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if ev, ok := r.find(turn, func(ev messages.Event) bool {
			return ev.Type == messages.EvTurnEnd || (ev.Type == messages.EvError && ev.Fatal)
		}); ok {
			return ev
		}
		if answer {
			if cl, ok := r.find(turn, func(ev messages.Event) bool {
				return ev.Type == messages.EvClarification && !answered[ev.ClarificationID]
			}); ok {
				answered[cl.ClarificationID] = true
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				require.NoError(t, sess.Answer(ctx, cl.ClarificationID, messages.DecisionAllowOnce, ""))
				cancel()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("turn %d did not end:\n%s", turn, r.dump())
	return messages.Event{}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// Run runs the check. Not parallel: it sets the daemon's environment.
func Run(t *testing.T, c Case) {
	NeedLandlock(t)
	kitDir := t.TempDir()
	kit, err := proc.NewKit(kitDir, "rt-confine")
	require.NoError(t, err)
	t.Cleanup(kit.Close)
	tr := contain.Wrap(c.Transport, contain.Options{Kit: kit})
	id := tr.Descriptor().ID
	assert.Contains(t, tr.Descriptor().Containment.Filesystem, "Landlock", "backends reports the confinement")

	ws, home, outside := t.TempDir(), c.Spec.Home, t.TempDir()
	if home == "" {
		home = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "id_test"), []byte("PLANTED-SSH-KEY"), 0o600))
	spec := c.Spec
	spec.Cwd, spec.Home = ws, home
	netProbe := ""
	if c.Network || c.Loopback {
		spec.Network = messages.NetworkModelOnly
		if c.Loopback {
			spec.Network = messages.NetworkLoopback
			if ok, why := proc.LoopbackHolds(); !ok {
				if os.Getenv("CI") == "true" {
					t.Fatal(why)
				}
				t.Skip(why)
			}
			u, err := url.Parse(c.Mock.URL())
			require.NoError(t, err)
			same, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", u.Port()))
			require.NoError(t, err)
			t.Cleanup(func() { _ = same.Close() })
			go func() {
				for {
					conn, err := same.Accept()
					if err != nil {
						return
					}
					_, _ = conn.Write([]byte("SAME-PORT-REACHED\n"))
					_ = conn.Close()
				}
			}()
			netProbe = fmt.Sprintf("bash -c 'cat < /dev/tcp/127.0.0.2/%s'; ", u.Port())
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { _ = ln.Close() })
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = conn.Write([]byte("LISTENER-REACHED\n"))
				_ = conn.Close()
			}
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		netProbe += fmt.Sprintf("bash -c 'cat < /dev/tcp/127.0.0.1/%d'; ", port)
	}
	if spec.SessionID == "" {
		spec.SessionID = "cs_confine_" + id
	}

	t.Setenv("GITEA_TOKEN", "gitea-founder-secret")
	_, err = tr.Open(ctx(t), spec, (&recorder{}).sink)
	var ce *proc.CredentialError
	require.True(t, errors.As(err, &ce), "%s: a founder credential in the daemon's environment refuses the start: %v", id, err)
	assert.Equal(t, 20, ce.ExitCode())
	var me *messages.Error
	require.True(t, errors.As(err, &me))
	assert.Equal(t, transports.FieldFounderCredentials, me.Field)
	require.NoError(t, os.Unsetenv("GITEA_TOKEN"))
	t.Setenv("CODESESSION_UNLISTED_PLANT", "unlisted-daemon-value")

	rec := &recorder{}
	sess, err := tr.Open(ctx(t), spec, rec.sink)
	require.NoError(t, err, "HOME holds (a folder the CLI made after its start is unreadable there): %s", listHome(home))
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = sess.Close(c)
	})

	// the outside paths are spelled in base64, so the command passes the
	// workspace gate of backends whose permission questions it checks
	// (which refuses a command naming a path outside): Landlock must stop
	// what the gate cannot see
	// (no command substitution either: gemini blocks it)
	b64 := func(s string) string { return "echo " + base64.StdEncoding.EncodeToString([]byte(s)) + " | base64 -d" }
	cmd := b64(filepath.Join(outside, "touched")) + " | xargs touch; " +
		b64(filepath.Join(home, ".ssh", "id_test")) + " | xargs cat; " +
		b64("echo x > "+filepath.Join(outside, "y")+"; echo ran > ./grandchild") + " > ./gc.sh; " +
		"(setsid sh ./gc.sh &); sleep 1; echo inside > ./inside.txt; " + netProbe + "echo SHELL-DONE"
	require.NoError(t, sess.StartTurn(ctx(t), 1, c.ShellPrompt(cmd)))
	// the processes run now (a per-turn backend's only while a turn runs)
	envs := proctest.Environs(t, kitDir)
	end := rec.turnEnd(t, sess, 1, c.Answer)
	require.Equal(t, messages.TurnCompleted, end.State, rec.dump())
	require.NotEmpty(t, envs, "the session's processes are recorded")
	for pid, env := range envs {
		joined := strings.Join(env, "\n")
		assert.NotContains(t, joined, "gitea-founder-secret", "pid %d", pid)
		assert.NotContains(t, joined, "unlisted-daemon-value", "pid %d: an allowlist, not a scrub list", pid)
		assert.Contains(t, joined, "TMPDIR=", "pid %d: a private TMPDIR", pid)
	}
	var out string
	for _, r := range c.Mock.ToolResults() {
		out += r.Content + "\n"
	}
	assert.Contains(t, out, "SHELL-DONE", "the command ran:\n%s", rec.dump())
	if c.ReadsOpen {
		assert.Contains(t, tr.Descriptor().Containment.Filesystem, "reads not restricted")
	} else {
		assert.NotContains(t, out, "PLANTED-SSH-KEY", "~/.ssh is unreadable")
	}
	if c.Network || c.Loopback {
		assert.NotContains(t, out, "LISTENER-REACHED", "a loopback port that is not the model's is unreachable")
	}
	if c.Loopback {
		assert.NotContains(t, out, "SAME-PORT-REACHED", "the model's port on another address is unreachable from the namespace")
	}
	assert.NoFileExists(t, filepath.Join(outside, "touched"), "no write outside the workspace")
	assert.FileExists(t, filepath.Join(ws, "inside.txt"), "writes inside the workspace work")
	assert.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(ws, "grandchild")); return err == nil },
		20*time.Second, 50*time.Millisecond, "the setsid grandchild ran")
	assert.NoFileExists(t, filepath.Join(outside, "y"), "the setsid grandchild is confined too")

	require.NoError(t, sess.StartTurn(ctx(t), 2, "say pong"))
	end2 := rec.turnEnd(t, sess, 2, c.Answer)
	require.Equal(t, messages.TurnCompleted, end2.State, "the session keeps working:\n%s", rec.dump())
}

// listHome names what HOME holds, two levels down: where a CLI keeps state
// the backend did not declare.
func listHome(home string) string {
	var out []string
	_ = filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if rel, _ := filepath.Rel(home, p); strings.Count(rel, "/") < 2 {
			out = append(out, rel)
		} else if d != nil && d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
	return strings.Join(out, " ")
}
