package supervise

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testPolicy is deterministic: no jitter.
func testPolicy() Policy {
	return Policy{
		Strategy:  OneForOne,
		Intensity: 3,
		Window:    30 * time.Second,
		Backoff: Backoff{
			InitialInterval: time.Second,
			MaxInterval:     10 * time.Second,
			Multiplier:      2,
			ResetAfter:      time.Minute,
		},
	}
}

func TestTracker(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type step struct {
		started bool // Started(at) instead of Failure(at)
		at      time.Duration
		want    Decision
	}
	restart := func(delay time.Duration, n int) Decision {
		return Decision{Restart: true, Delay: delay, Reason: ReasonWithinPolicy, Restarts: n}
	}
	exceeded := func(n int) Decision { return Decision{Reason: ReasonIntensityExceeded, Restarts: n} }
	tests := []struct {
		name   string
		policy func(*Policy)
		steps  []step
	}{
		{
			name: "window counts restarts, the one past intensity escalates",
			steps: []step{
				{at: 0, want: restart(1*time.Second, 1)},
				{at: 2 * time.Second, want: restart(2*time.Second, 2)},
				{at: 5 * time.Second, want: restart(4*time.Second, 3)},
				{at: 10 * time.Second, want: exceeded(3)},
				// an escalation uses no budget: still exceeded
				{at: 11 * time.Second, want: exceeded(3)},
			},
		},
		{
			name: "restarts slide out of the window",
			steps: []step{
				{at: 0, want: restart(1*time.Second, 1)},
				{at: 10 * time.Second, want: restart(2*time.Second, 2)},
				{at: 20 * time.Second, want: restart(4*time.Second, 3)},
				// t=30s: the restart at 0 is exactly Window old, so out
				{at: 30 * time.Second, want: restart(8*time.Second, 3)},
				{at: 35 * time.Second, want: exceeded(3)},
				// t=50s: 10s and 20s are out, 30s remains
				{at: 50 * time.Second, want: restart(10*time.Second, 2)},
			},
		},
		{
			name: "backoff grows and is capped at MaxInterval",
			policy: func(p *Policy) {
				p.Intensity = 100
				p.Window = time.Second // every failure below is outside the previous one's window
			},
			steps: []step{
				{at: 0, want: restart(1*time.Second, 1)},
				{at: 10 * time.Second, want: restart(2*time.Second, 1)},
				{at: 20 * time.Second, want: restart(4*time.Second, 1)},
				{at: 30 * time.Second, want: restart(8*time.Second, 1)},
				{at: 40 * time.Second, want: restart(10*time.Second, 1)},
				{at: 50 * time.Second, want: restart(10*time.Second, 1)},
			},
		},
		{
			name:   "stable uptime resets the backoff",
			policy: func(p *Policy) { p.Intensity = 100; p.Window = time.Second },
			steps: []step{
				{started: true, at: 0},
				{at: 1 * time.Second, want: restart(1*time.Second, 1)},
				{started: true, at: 2 * time.Second},
				{at: 3 * time.Second, want: restart(2*time.Second, 1)},
				{started: true, at: 5 * time.Second},
				{at: 6 * time.Second, want: restart(4*time.Second, 1)},
				{started: true, at: 10 * time.Second},
				// up for exactly ResetAfter
				{at: 70 * time.Second, want: restart(1*time.Second, 1)},
				{started: true, at: 71 * time.Second},
				{at: 72 * time.Second, want: restart(2*time.Second, 1)},
			},
		},
		{
			name:   "ResetAfter 0 never resets",
			policy: func(p *Policy) { p.Intensity = 100; p.Window = time.Second; p.Backoff.ResetAfter = 0 },
			steps: []step{
				{started: true, at: 0},
				{at: 1 * time.Second, want: restart(1*time.Second, 1)},
				{started: true, at: 2 * time.Second},
				{at: time.Hour, want: restart(2*time.Second, 1)},
			},
		},
		{
			name:   "intensity 0 escalates the first failure",
			policy: func(p *Policy) { p.Intensity = 0 },
			steps:  []step{{at: 0, want: exceeded(0)}},
		},
		{
			name:   "zero initial interval restarts at once",
			policy: func(p *Policy) { p.Backoff.InitialInterval = 0 },
			steps: []step{
				{at: 0, want: restart(0, 1)},
				{at: time.Second, want: restart(0, 2)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPolicy()
			if tt.policy != nil {
				tt.policy(&p)
			}
			require.NoError(t, p.Validate())
			tr := NewTracker(p)
			for i, s := range tt.steps {
				if s.started {
					tr.Started(at(s.at))
					continue
				}
				assert.Equal(t, s.want, tr.Failure(at(s.at)), "step %d (t=%v)", i, s.at)
			}
		})
	}
}

func TestTrackerJitter(t *testing.T) {
	p := testPolicy()
	p.Intensity = 1000
	p.Window = time.Nanosecond
	p.Backoff.RandomizationFactor = 0.5
	p.Backoff.ResetAfter = 0
	tr := NewTracker(p)
	now := time.Unix(0, 0)
	base := p.Backoff.InitialInterval
	distinct := map[time.Duration]bool{}
	for i := range 200 {
		now = now.Add(time.Minute)
		d := tr.Failure(now)
		require.True(t, d.Restart)
		lo := time.Duration(float64(base) * 0.5)
		hi := min(time.Duration(float64(base)*1.5)+1, p.Backoff.MaxInterval)
		require.GreaterOrEqual(t, d.Delay, lo, "failure %d", i)
		require.LessOrEqual(t, d.Delay, hi, "failure %d: MaxInterval caps the jittered delay", i)
		distinct[d.Delay] = true
		base = min(base*2, p.Backoff.MaxInterval)
	}
	assert.Greater(t, len(distinct), 10, "jitter should vary the delays")
}

func TestPolicyValidate(t *testing.T) {
	require.NoError(t, DefaultPolicy().Validate())
	require.NoError(t, testPolicy().Validate())

	var zero Policy
	err := zero.Validate()
	require.Error(t, err)
	for _, want := range []string{"strategy", "window", "multiplier"} {
		assert.Contains(t, err.Error(), want)
	}

	bad := DefaultPolicy()
	bad.Intensity = -1
	bad.Backoff.InitialInterval = time.Minute
	bad.Backoff.MaxInterval = time.Second
	bad.Backoff.RandomizationFactor = 1
	bad.Backoff.ResetAfter = -1
	err = bad.Validate()
	require.Error(t, err)
	for _, want := range []string{"intensity -1", "max interval", "randomization factor", "reset-after"} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestEnumsHaveInvalidZeroAndString(t *testing.T) {
	assert.False(t, Strategy(0).Valid())
	assert.False(t, RestartType(0).Valid())
	assert.Equal(t, "Strategy(0)", Strategy(0).String())
	assert.Equal(t, "RestartType(0)", RestartType(0).String())
	assert.Equal(t, "ChildState(0)", ChildState(0).String())
	assert.Equal(t, "EventKind(0)", EventKind(0).String())
	assert.Equal(t, "one_for_one", OneForOne.String())
	assert.Equal(t, "rest_for_one", RestForOne.String())
	for _, r := range []RestartType{Permanent, Transient, Temporary} {
		assert.True(t, r.Valid())
		assert.False(t, strings.HasPrefix(r.String(), "RestartType("))
	}
	for s := StateNotStarted; s <= StateEscalated; s++ {
		assert.False(t, strings.HasPrefix(s.String(), "ChildState("))
	}
	for k := EventFailed; k <= EventDropped; k++ {
		assert.False(t, strings.HasPrefix(k.String(), "EventKind("))
	}
}

func TestChildSpecValidate(t *testing.T) {
	require.Error(t, ChildSpec{}.Validate())
	err := ChildSpec{Name: "a/b", Restart: Permanent, InboxSize: -1}.Validate()
	require.Error(t, err)
	for _, want := range []string{"'/'", "producer is nil", "inbox size"} {
		assert.Contains(t, err.Error(), want)
	}

	s := New([]ChildSpec{{Name: "x"}, {Name: "x"}}, Policy{})
	require.Error(t, s.StartAll(nil))
}
