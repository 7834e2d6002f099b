package supervise

import (
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Reasons carried by Decision, Escalation and Event. They are stable strings
// meant for persisted supervision events and for the UI.
const (
	// ReasonWithinPolicy: the failure is restarted after Decision.Delay.
	ReasonWithinPolicy = "within-policy"
	// ReasonIntensityExceeded: more than Policy.Intensity restarts within
	// Policy.Window; the child is not restarted and the failure escalates.
	ReasonIntensityExceeded = "intensity-exceeded"
	// ReasonTemporary: a Temporary child failed; it is never restarted.
	ReasonTemporary = "temporary"
	// ReasonNormalExit: a Transient or Temporary child exited normally and
	// is not restarted.
	ReasonNormalExit = "normal-exit"
	// ReasonAbnormalExit: a child exited (Exit with normal=false, or a
	// Permanent child exited at all) and is restarted like a failure.
	ReasonAbnormalExit = "abnormal-exit"
	// ReasonSiblingRestart: under RestForOne, a child restarted because an
	// earlier sibling failed.
	ReasonSiblingRestart = "sibling-restart"
	// ReasonShutdownTimeout: the child did not stop within its
	// ShutdownTimeout and was abandoned.
	ReasonShutdownTimeout = "shutdown-timeout"
	// ReasonChildDown: a message for a child that will not run again was
	// dropped.
	ReasonChildDown = "child-down"
	// ReasonBufferFull: a bounced message was dropped because the child's
	// restart buffer was full.
	ReasonBufferFull = "buffer-full"
	// ReasonStopping: a failure of a child that was already being stopped
	// or restarted; noted, nothing else to do.
	ReasonStopping = "already-stopping"
)

// Decision is the Tracker's verdict on one failure.
type Decision struct {
	Restart bool
	// Delay before the restart; 0 when Restart is false.
	Delay time.Duration
	// Reason is ReasonWithinPolicy or ReasonIntensityExceeded.
	Reason string
	// Restarts is the number of restarts within the window, this one
	// included when Restart is true.
	Restarts int
}

func (d Decision) String() string {
	if !d.Restart {
		return fmt.Sprintf("no restart (%s, %d in window)", d.Reason, d.Restarts)
	}
	return fmt.Sprintf("restart in %v (%s, %d in window)", d.Delay, d.Reason, d.Restarts)
}

// Tracker is the pure decision core of supervision, in the manner of nomad's
// RestartTracker: given the time of each failure and of each (re)start, it
// decides whether to restart and after how long. It holds no timers and starts
// no goroutines; time is whatever the caller passes in. A Tracker is not safe
// for concurrent use (the Supervisor keeps one per child and uses it only on
// the parent's goroutine).
type Tracker struct {
	policy   Policy
	restarts []time.Time // restart times within the window, oldest first
	started  time.Time   // last Started; zero before the first
	clock    feedClock
	backoff  *backoff.ExponentialBackOff
}

// feedClock is the backoff.Clock of a Tracker: it reads the last time the
// caller passed in, so backoff never looks at the wall clock.
type feedClock struct{ now *time.Time }

func (c feedClock) Now() time.Time { return *c.now }

// NewTracker returns a Tracker for p. p should be valid (Policy.Validate);
// the Tracker itself only clamps what would make the arithmetic misbehave.
func NewTracker(p Policy) *Tracker {
	t := &Tracker{policy: p}
	t.clock = feedClock{now: new(time.Time)}
	mult := p.Backoff.Multiplier
	if mult < 1 {
		mult = 1
	}
	t.backoff = &backoff.ExponentialBackOff{
		InitialInterval:     p.Backoff.InitialInterval,
		RandomizationFactor: p.Backoff.RandomizationFactor,
		Multiplier:          mult,
		MaxInterval:         p.Backoff.MaxInterval,
		MaxElapsedTime:      0, // never Stop: the intensity window decides when to give up
		Stop:                backoff.Stop,
		Clock:               t.clock,
	}
	t.backoff.Reset()
	return t
}

// Started notes that the child (re)started at now; a failure at least
// Backoff.ResetAfter later starts the backoff again from InitialInterval.
func (t *Tracker) Started(now time.Time) { t.started = now }

// Failure decides what to do about a failure at now. A restart decision is
// recorded in the window; an intensity-exceeded decision is not (the child is
// not restarted, so it used no budget).
func (t *Tracker) Failure(now time.Time) Decision {
	*t.clock.now = now
	if ra := t.policy.Backoff.ResetAfter; ra > 0 && !t.started.IsZero() && now.Sub(t.started) >= ra {
		t.backoff.Reset()
	}
	// Slide the window: keep the restarts strictly within (now-Window, now].
	cut := 0
	for cut < len(t.restarts) && now.Sub(t.restarts[cut]) >= t.policy.Window {
		cut++
	}
	t.restarts = append(t.restarts[:0], t.restarts[cut:]...)
	if len(t.restarts) >= t.policy.Intensity {
		return Decision{Reason: ReasonIntensityExceeded, Restarts: len(t.restarts)}
	}
	t.restarts = append(t.restarts, now)
	delay := t.backoff.NextBackOff()
	if delay > t.policy.Backoff.MaxInterval {
		delay = t.policy.Backoff.MaxInterval
	}
	if delay < 0 {
		delay = 0
	}
	return Decision{Restart: true, Delay: delay, Reason: ReasonWithinPolicy, Restarts: len(t.restarts)}
}
