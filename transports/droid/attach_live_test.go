package droid

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/cli/clitest"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// resumed is what droid logs once `droid --resume <id> <prompt>` has
// found the session and entered its interactive resume.
const resumed = "Initial prompt ignored when resuming session"

// TestLiveAttachCommandFindsTheSessionButCannotRunHeadless runs the
// descriptor's attach command for a closed session, in the workspace with
// the session's HOME. The pinned droid has no headless form of it that
// works offline with a BYOK model, so this checks what does hold:
//
//   - `droid --resume <id> <prompt>` finds the session (an id droid does
//     not know exits 1, "Session not found") and enters its interactive
//     resume, which ignores the prompt and, without a terminal, waits; the
//     model is never asked. (Run from a terminal with the session's HOME
//     and no Factory login, it stops at "Please login with your Factory
//     account": the interactive attach needs a login.)
//   - `droid exec -s <id> <prompt>`, the headless form of the same session,
//     exits 1 with no output and sends the model nothing (cli-protocols
//     §3.2; resume uses droid.load_session instead).
//   - `droid exec --fork <id> <prompt>` loads the same transcript, by the
//     same id and HOME, into a new session: the model's request carries
//     turn 1.
//
// A template naming a flag droid does not know, or one that ignores the
// id, fails the first check.
func TestLiveAttachCommandFindsTheSessionButCannotRunHeadless(t *testing.T) {
	t.Parallel()
	l := newLive(t, clitest.RememberWord("marmalade"), liveOpts{})
	require.NoError(t, l.sess.StartTurn(ctxFor(t, time.Minute), 1, "remember the word marmalade"))
	require.Equal(t, messages.TurnCompleted, l.rec.turnEnd(t, 1).State, dump(l.rec.all()))
	ext := l.sess.(*session).Ext
	l.close()

	bin := droidBinary(t)
	env := append(os.Environ(), "HOME="+l.spec.Home)
	consoleLog := filepath.Join(l.spec.Home, ".factory", "logs", "console.log")
	attach := func(id string) ([]string, string, error) {
		tmpl := descriptor().ExternalAttach.CommandTemplate
		argv := strings.Fields(strings.NewReplacer("{sessionId}", id, "{cwd}", l.spec.Cwd).Replace(tmpl))
		require.Equal(t, "droid", argv[0], tmpl)
		require.NoError(t, os.WriteFile(consoleLog, nil, 0o600))
		entered := func(string) bool {
			b, _ := os.ReadFile(consoleLog)
			return strings.Contains(string(b), resumed)
		}
		out, err := subprocesstest.RunGroup(t, 2*time.Minute, entered,
			l.spec.Cwd, env, bin, append(argv[1:], "what was the word")...)
		return argv, out, err
	}
	n := len(l.mock.MainRequests())

	// an id droid does not know: it says so and exits
	unknown := transports.NewUUID()
	argv, out, err := attach(unknown)
	logged, _ := os.ReadFile(consoleLog)
	require.Error(t, err, "%q\n%s", argv, out)
	assert.NotContains(t, string(logged), resumed)
	assert.Contains(t, string(logged), "Session not found: "+unknown, "%q\n%s", argv, out)

	// the session's id: found, and the interactive resume entered
	argv, out, err = attach(ext)
	logged, _ = os.ReadFile(consoleLog)
	require.NoError(t, err, "%q\n%s\n%s", argv, out, logged)
	assert.NotContains(t, string(logged), "Session not found", "%q", argv)
	assert.Len(t, l.mock.MainRequests(), n, "%q: the interactive resume asked the model", argv)

	// exec -s: the same session, headless; nothing reaches the model
	out, err = subprocesstest.RunGroup(t, 2*time.Minute, nil, l.spec.Cwd, env, bin, "exec", "-s", ext, "-m", mockModelID, "what was the word")
	require.Error(t, err, "droid exec -s now answers offline: run the attach command headless with it\n%s", out)
	assert.Len(t, l.mock.MainRequests(), n, "exec -s reached the model: run the attach command headless with it\n%s", out)

	// exec --fork: the transcript the id and HOME name carries turn 1
	out, err = subprocesstest.RunGroup(t, 2*time.Minute, nil, l.spec.Cwd, env, bin, "exec", "--fork", ext, "-m", mockModelID, "what was the word")
	require.NoError(t, err, out)
	reqs := l.mock.MainRequests()
	require.Greater(t, len(reqs), n, "the fork sent the model nothing\n%s", out)
	last := string(reqs[len(reqs)-1].Body)
	require.True(t, strings.Contains(last, "what was the word"), "the model's request is not the fork's prompt\n%s", out)
	require.True(t, strings.Contains(last, "remember the word marmalade"), "the fork's request does not carry turn 1\n%s", out)
}
