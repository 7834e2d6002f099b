package claudecode

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/cli/clitest"
	"github.com/codesession/codesession/transports/subprocess/subprocesstest"
)

// TestLiveAttachCommandResumesTheSession runs the descriptor's attach
// command for a closed session, made non-interactive with -p (claude's
// print mode takes --resume like the TUI), in the workspace with the
// session's HOME and the environment that points claude at the mock: the
// model's request carries the session's earlier turn. A template naming a
// flag claude does not know fails here.
func TestLiveAttachCommandResumesTheSession(t *testing.T) {
	t.Parallel()
	l := newLive(t, clitest.RememberWord("marmalade"), liveOpts{})
	require.NoError(t, l.sess.StartTurn(ctxFor(t, time.Minute), 1, "remember the word marmalade"))
	require.Equal(t, messages.TurnCompleted, l.rec.turnEnd(t, 1).State, dump(l.rec.all()))
	started, _ := l.rec.wait(t, time.Second, 0, func(te turnEvent) bool { return te.ev.Type == messages.EvStarted })
	ext := started.ev.ExternalSessionID
	l.close()

	tmpl := descriptor().ExternalAttach.CommandTemplate
	argv := strings.Fields(strings.NewReplacer("{sessionId}", ext, "{cwd}", l.spec.Cwd).Replace(tmpl))
	require.Equal(t, "claude", argv[0], tmpl)
	env := append(append(os.Environ(), "HOME="+l.spec.Home, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"), l.spec.Env...)
	n := len(l.mock.MainRequests())
	out, err := subprocesstest.RunGroup(t, 3*time.Minute, nil, l.spec.Cwd, env, claudeBinary(t), append(argv[1:], "-p", "what was the word")...)
	require.NoError(t, err, "%q\n%s", argv, out)
	reqs := l.mock.MainRequests()
	require.Greater(t, len(reqs), n, "the attach command sent the model nothing\n%s", out)
	last := string(reqs[len(reqs)-1].Body)
	require.True(t, strings.Contains(last, "what was the word"), "%q: the model's request is not the attach command's prompt\n%s", argv, out)
	require.True(t, strings.Contains(last, "remember the word marmalade"), "%q: the model's request does not carry turn 1: the session was not resumed\n%s", argv, out)
	require.Contains(t, out, "It was marmalade.")
}
