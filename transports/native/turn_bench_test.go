package native

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/modelmock"
)

// benchScenario is bench's native scenario: thinking, text and an ls call,
// then a closing text.
func benchScenario() *modelmock.Scenario {
	return &modelmock.Scenario{Rules: []modelmock.Rule{{Match: modelmock.Match{Text: "bench"}, Steps: []modelmock.Step{
		{Thinking: "list the files first", Text: "Looking at the workspace.", Tool: &modelmock.ToolCall{Name: ToolLs, Input: json.RawMessage(`{}`)}},
		{Text: "Done: the workspace is listed."},
	}}}}
}

// BenchmarkTurn runs the bench suite's native turn (two model calls and an
// ls between them), 20 turns per session, on 1 and on 16 sessions at
// once. Besides the time per turn it reports the process's CPU per turn
// (cpu-us/turn: the loop, net/http and modelmock, whose share is the same
// for any client sending the same calls), which is what the bench's
// ladder is made of at 16 and 64 sessions, where the 2 cores are busy.
func BenchmarkTurn(b *testing.B) {
	for _, c := range []int{1, 16} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) { benchTurns(b, c) })
	}
}

func benchTurns(b *testing.B, c int) {
	mock, err := modelmock.Start(nil, benchScenario())
	if err != nil {
		b.Fatal(err)
	}
	defer mock.Close()
	tr := New(WithProcessEnv(nil))
	ctx := context.Background()
	// each session runs its share of b.N turns, in sessions of 20 turns
	var wg sync.WaitGroup
	errs := make(chan error, c)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for g := range c {
		n := b.N / c
		if g < b.N%c {
			n++
		}
		dir := b.TempDir()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sessionTurns(ctx, tr, mock.URL(), dir, n); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-us/turn")
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// sessionTurns runs n turns in sessions of 20 turns each.
func sessionTurns(ctx context.Context, tr *Transport, url, dir string, n int) error {
	for n > 0 {
		ends := make(chan messages.Event, 1)
		s, err := tr.Open(ctx, transportsSpec(url, dir), func(turn int, ev messages.Event) {
			if ev.Type == messages.EvTurnEnd {
				ends <- ev
			}
		})
		if err != nil {
			return err
		}
		for t := 1; t <= 20 && n > 0; t, n = t+1, n-1 {
			if err := s.StartTurn(ctx, t, fmt.Sprintf("bench turn %d", t)); err != nil {
				return err
			}
			if ev := <-ends; ev.State != messages.TurnCompleted {
				return fmt.Errorf("turn %d: %+v", t, ev)
			}
		}
		if err := s.Close(ctx); err != nil {
			return err
		}
	}
	return nil
}

// processCPU is this process's user and system CPU so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func transportsSpec(url string, dir string) transports.SessionSpec {
	return transports.SessionSpec{Cwd: dir, Model: "claude-mock", Posture: messages.PostureDefault,
		Env: []string{EnvAnthropicBaseURL + "=" + url, EnvAnthropicAPIKey + "=bench-key"}}
}
