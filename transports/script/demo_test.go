package script

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden transcripts under testdata/")

// TestDemoTranscript plays the demo scenario (allowing Bash for the session
// at the first ask) and compares its transcript with
// testdata/demo.transcript.
func TestDemoTranscript(t *testing.T) {
	var transcript string
	bubble(t, func(t *testing.T) {
		dir := t.TempDir()
		s, rec := openSession(t, New(), transports.SessionSpec{
			Cwd: dir, Model: "script-standard", Env: []string{EnvScenario + "=builtin:demo"}})
		start := time.Now()

		play(t, s, 1, "Add a small greeting package")
		settle(t, rec, 1)
		require.NoError(t, s.Answer(bg, clarificationID(t, rec.turn(t, 1)), messages.DecisionAllowSession, ""))
		settle(t, rec, 1)
		play(t, s, 2, "Now add a test for it")
		settle(t, rec, 2)
		play(t, s, 3, "Anything else?")
		settle(t, rec, 3)
		// the bubble's clock is virtual: it moved by the scenario's
		// delays (and settle's steps), whatever the machine's speed; a
		// delay step that did not wait would leave it short
		var delays time.Duration
		for _, tn := range DemoScenario().Turns {
			for _, st := range tn.Steps {
				if st.Delay != nil {
					delays += time.Duration(*st.Delay)
				}
			}
		}
		require.NotZero(t, delays)
		assert.GreaterOrEqual(t, time.Since(start), delays, "the scripted delays take virtual time")

		greet, err := os.ReadFile(filepath.Join(dir, "greet", "greet.go"))
		require.NoError(t, err)
		assert.Contains(t, string(greet), "func Greet(name string) string")
		assert.FileExists(t, filepath.Join(dir, "README.md"))
		assert.FileExists(t, filepath.Join(dir, "greet", "greet_test.go"))

		var b strings.Builder
		for _, e := range rec.all() {
			fmt.Fprintf(&b, "%d %s\n", e.turn, brief(e.ev))
		}
		transcript = normalize(b.String(), dir, rec.all()[0].ev.ExternalSessionID)
	})
	golden := filepath.Join("testdata", "demo.transcript")
	if *rewrite {
		require.NoError(t, os.WriteFile(golden, []byte(transcript), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run go test -run TestDemoTranscript -rewrite to create it")
	assert.Equal(t, string(want), transcript)
}

var clarIDs = regexp.MustCompile(`clar-[0-9a-f]+-`)

// normalize replaces what changes from run to run.
func normalize(s, dir, ext string) string {
	s = strings.ReplaceAll(s, dir, "$CWD")
	s = strings.ReplaceAll(s, ext, "script-$ID")
	return clarIDs.ReplaceAllString(s, "clar-$$NONCE-")
}

// TestDemoInRealTime plays the demo outside a bubble, as the demo command
// does, answering from inside the sink.
func TestDemoInRealTime(t *testing.T) {
	dir := t.TempDir()
	rec := &recorder{}
	var s transports.Session
	ends := make(chan messages.Event, 4)
	rec.onEvent = func(turn int, ev messages.Event) {
		switch ev.Type {
		case messages.EvClarification:
			if err := s.Answer(bg, ev.ClarificationID, messages.DecisionAllowOnce, ""); err != nil {
				t.Errorf("answer: %v", err)
			}
		case messages.EvTurnEnd:
			ends <- ev
		}
	}
	var err error
	s, err = New(WithScenario(DemoScenario()), WithDelayScale(0)).Open(bg, transports.SessionSpec{Cwd: dir}, rec.sink)
	require.NoError(t, err)
	defer func() {
		require.NoError(t, s.Close(bg))
		rec.markClosed()
		assert.Equal(t, 0, rec.lateCalls())
	}()
	for i, in := range []string{"Add a greeting package", "add tests"} {
		require.NoError(t, s.StartTurn(bg, i+1, in))
		select {
		case ev := <-ends:
			assert.Equal(t, messages.TurnCompleted, ev.State)
			assert.Equal(t, i+1, ev.NumTurns)
		case <-time.After(time.Minute):
			t.Fatalf("turn %d did not end: %v", i+1, rec.briefs(t, i+1))
		}
	}
	assert.FileExists(t, filepath.Join(dir, "greet", "greet_test.go"))
}
