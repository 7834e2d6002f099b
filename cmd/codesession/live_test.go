package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

func delta(text string) messages.PersistedEvent {
	return messages.PersistedEvent{Event: messages.Event{Type: messages.EvText, Delta: true, Text: text}}
}

func TestLiveTextWritesEveryDeltaIndentedAndFlushes(t *testing.T) {
	var out syncBuffer
	l := newLiveText(&out)
	for _, d := range []string{"Hel", "lo\nwor", "ld", "\n\nand more"} {
		l.listen("cs_x", delta(d))
	}
	l.listen("cs_x", messages.PersistedEvent{Event: messages.Event{Type: messages.EvText, Text: "the whole text is not live"}})
	l.listen("cs_x", messages.PersistedEvent{Event: messages.Event{Type: messages.EvThinking, Delta: true, Text: "thinking is not printed"}})
	l.flush()
	assert.Equal(t, "   Hello\n   world\n\n   and more\n", out.String(), "every delta, in order, the open line ended by the flush")
	l.listen("cs_x", delta("next turn"))
	l.close()
	assert.Equal(t, "   Hello\n   world\n\n   and more\n   next turn\n", out.String(), "close writes what is queued")
	l.listen("cs_x", delta("after close"))
	assert.NotContains(t, out.String(), "after close")
}

// run streams a turn's text before the turn's result is printed.
func TestRunPrintsTextLiveBeforeTheResult(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	sc := writeScenario(t, `{"turns": [{"steps": [{"write": {"path": "a.txt", "content": "a\\n"}}, {"text": "streamed live words"}]}]}`)
	res := runCLI(t, invocation{}, "run", "--backend", "script", "--cwd", work, "--env", "CODESESSION_SCRIPT="+sc, "talk")
	require.Equal(t, exitOK, res.code, "stderr: %s", res.stderr)
	live := strings.Index(res.stdout, "   streamed live words\n")
	head := strings.Index(res.stdout, "== turn 1: turn_complete")
	require.GreaterOrEqual(t, live, 0, res.stdout)
	require.GreaterOrEqual(t, head, 0, res.stdout)
	assert.Less(t, live, head, "the live text comes before the result:\n%s", res.stdout)
	assert.Equal(t, 1, strings.Count(res.stdout, "streamed live words"), "live, and not again in the result (issue 37):\n%s", res.stdout)
	assert.True(t, strings.HasPrefix(lastLine(res.stdout), "stopped session "), res.stdout)

	js := runCLI(t, invocation{}, "run", "--backend", "script", "--json", "--cwd", work, "--env", "CODESESSION_SCRIPT="+sc, "talk")
	require.Equal(t, exitOK, js.code, "stderr: %s", js.stderr)
	results, _ := jsonLines(t, js.stdout) // every line is JSON: no live text
	require.Len(t, results, 1)
	assert.Equal(t, "streamed live words", results[0].Text)
}

// The next turn's deltas can arrive while the printer writes a result:
// both go through one lock (a plain buffer here, so -race sees any
// unsynchronized write) and a printed line never continues a live one.
func TestLiveTextAndPrinterShareTheOutput(t *testing.T) {
	var out bytes.Buffer
	l := newLiveText(&out)
	pw := l.printerWriter()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			l.listen("cs_x", delta("live "))
		}
	}()
	for i := 0; i < 200; i++ {
		_, err := io.WriteString(pw, "printed\n")
		require.NoError(t, err)
	}
	<-done
	l.close()
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if strings.Contains(line, "printed") {
			assert.Equal(t, "printed", line, "a printed line starts a line of its own")
		}
	}
	assert.Equal(t, 200, strings.Count(out.String(), "printed\n"))
	assert.Equal(t, 200, strings.Count(out.String(), "live "))
}
