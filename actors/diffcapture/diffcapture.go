// Package diffcapture computes what each turn of a session changed in its
// working directory. Capturer is the seam: the session's diff-capture actor
// calls Begin before a turn reaches the backend and Finish after it closes.
// Noop is the working placeholder that reports source "none"; the git
// capture and the tool-event fallback of seed 000 §6 fill this package.
//
// Concurrency: a Capturer is used by one actor, one call at a time, from a
// goroutine the actor owns (captures may run git and take time). Capture
// problems never fail a turn: they become source "none" with a warning.
package diffcapture

import (
	"context"

	"github.com/codesession/codesession/messages"
)

// Baseline is whatever a Capturer needs to remember from turn start.
type Baseline any

// Capturer snapshots before a turn and diffs after it.
type Capturer interface {
	// Begin records the state of the workspace before a turn.
	Begin(ctx context.Context) (Baseline, error)
	// Finish returns what changed since b. editPaths are the paths the
	// agent's edit tools named during the turn (the fallback when git is not
	// available). It never fails: problems are reported in the diff's
	// Warning with source none.
	Finish(ctx context.Context, b Baseline, editPaths []string) messages.TurnDiff
}

// Factory builds the Capturer for a session's working directory and backend.
type Factory func(cwd string, d messages.Descriptor) Capturer

// Noop captures nothing and says so.
type Noop struct{}

func (Noop) Begin(context.Context) (Baseline, error) { return nil, nil }

func (Noop) Finish(context.Context, Baseline, []string) messages.TurnDiff {
	return messages.TurnDiff{Source: messages.DiffNone, Files: []messages.FileChange{}, Summary: "no diff capture configured"}
}

// NoopFactory returns Noop for every session.
func NoopFactory(string, messages.Descriptor) Capturer { return Noop{} }
