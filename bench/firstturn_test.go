package bench

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/transports/claudecode"
)

// The firstturn suite at its smallest, against the real claude CLI: it
// runs, passes its checks and produces every figure with its baseline
// (no figure is compared with a threshold).
func TestFirstTurnProducesTheFigures(t *testing.T) {
	bin := os.Getenv(claudecode.EnvBinary)
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s is not set (bash .ci/run installs the pinned claude)", claudecode.EnvBinary)
		}
		t.Skipf("%s is not set: the firstturn suite needs the real claude CLI", claudecode.EnvBinary)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// two rounds: the later and permission turns run on two processes a side
	res, err := Run(ctx, SuiteFirstTurn, Options{ClaudeBin: bin, FirstTurnRounds: 2, Home: t.TempDir()})
	require.NoError(t, err)
	require.Empty(t, res.Skipped)
	require.True(t, res.Passed(), "%v", res.Failures())
	want := []string{"start to first turn, warm pool, p50", "start to first turn, warm pool not settled yet, p50", "start to first turn, no pool, p50", "start to first turn, warm pool, max",
		"later turn, diff capture on, p50", "later turn, diff capture off, p50", "permission turn, diff capture on, p50", "permission turn, diff capture off, p50",
		"permission turn, diff capture on, vs capture by hand, p50", "bare CLI permission turn with capture by hand, p50",
		"CPU of this process through a permission turn, capture off, p50",
		"later turn, capture off: the turn handed to the CLI to its result taken in, p50", "later turn, capture on: the turn handed to the CLI to its result taken in, p50"}
	var got, hops, paired []string
	turn := map[string]float64{}
	for _, r := range res.Rows {
		if r.Unit == UnitRatio {
			// a median of the rounds' paired ratios (one round: its ratio)
			paired = append(paired, r.Figure)
			assert.Greater(t, r.Value, 0.0, r.Figure)
			continue
		}
		if r.Baseline == nil {
			// the runtime's own hops inside a turn: each
			// within that turn
			hops = append(hops, r.Figure)
			side, _, _ := strings.Cut(r.Figure, ":")
			assert.GreaterOrEqual(t, r.Value, 0.0, r.Figure)
			assert.Less(t, r.Value, turn[side], "%s: a hop of the turn is shorter than the turn", r.Figure)
			continue
		}
		got = append(got, r.Figure)
		assert.Greater(t, r.Value, 0.0, r.Figure)
		assert.Greater(t, r.Baseline.Value, 0.0, r.Figure)
		require.NotNil(t, r.Ratio, r.Figure)
		for _, kind := range []string{"permission turn", "later turn"} {
			if rest, ok := strings.CutPrefix(r.Figure, kind+", diff "); ok {
				turn[kind+", "+strings.TrimSuffix(rest, ", p50")] = r.Value
			}
		}
	}
	assert.Equal(t, want, got)
	assert.Contains(t, strings.Join(res.Notes, "\n"), "each side runs 2 CLI processes")
	assert.Len(t, hops, 10, "three hops of each permission turn, two of each later turn: %v", hops)
	assert.Len(t, paired, 5, "the turns paired with their round's control: %v", paired)
}

func TestFirstTurnSkipsWithoutClaude(t *testing.T) {
	res, err := Run(context.Background(), SuiteFirstTurn, Options{Home: t.TempDir()})
	require.NoError(t, err)
	assert.Contains(t, res.Skipped, claudecode.EnvBinary)
	assert.True(t, res.Passed())
}

func TestPairedRatioIsTheMedianOfEachRoundsRatio(t *testing.T) {
	lat := func(ms ...int) *latencies {
		l := &latencies{}
		for _, m := range ms {
			l.add(time.Duration(m) * time.Millisecond)
		}
		return l
	}
	// the medians' ratio is 20/20 = 1; the rounds' ratios are 3, 1
	// and 1.5 (the first round was busy on both sides)
	assert.InDelta(t, 1.5, pairedRatio(lat(90, 20, 15), lat(30, 20, 10)), 1e-9)
	assert.InDelta(t, 1.25, pairedRatio(lat(10, 30), lat(10, 20)), 1e-9, "an even count takes the middle two")
	assert.InDelta(t, 2.0, pairedRatio(lat(20, 50), lat(10)), 1e-9, "only rounds both sides ran")
	assert.True(t, math.IsNaN(pairedRatio(lat(), lat(10))), "no pair")
}

// A bare CLI that never answers, and left a child holding its stdout,
// fails its read when the context ends instead of waiting for ever: the
// whole process group is killed and the read ended.
func TestBareClaudeThatStallsFailsAtItsDeadline(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "stalls")
	// a child in the background keeps the stdout pipe open; the CLI
	// itself reads its stdin and answers nothing
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\nsleep 600 &\nexec cat >/dev/null\n"), 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := startBareClaude(ctx, bin, dir, nil, filepath.Join(dir, "home"), false)
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no answer in time")
	case <-time.After(time.Minute): // only stops a hang
		t.Fatal("the read of a stalled CLI never ended")
	}
}
