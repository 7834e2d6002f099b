package supervise

import (
	"errors"
	"fmt"
	"time"
)

// Strategy says which children are restarted when one of them fails. The zero
// value is invalid.
type Strategy int

const (
	// OneForOne restarts only the child that failed.
	OneForOne Strategy = iota + 1
	// RestForOne restarts the child that failed and every child started
	// after it (in ChildSpec order): use it when later children depend on
	// earlier ones (the session's transport -> diffcapture -> persist).
	RestForOne
)

func (s Strategy) Valid() bool { return s == OneForOne || s == RestForOne }

func (s Strategy) String() string {
	switch s {
	case OneForOne:
		return "one_for_one"
	case RestForOne:
		return "rest_for_one"
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// RestartType says when one child is restarted. The zero value is invalid.
type RestartType int

const (
	// Permanent children are always restarted: after a panic and after any
	// exit, normal or not.
	Permanent RestartType = iota + 1
	// Transient children are restarted after a panic or an abnormal exit,
	// never after a normal exit.
	Transient
	// Temporary children are never restarted. A Temporary child that panics
	// is reported as an Escalation with ReasonTemporary.
	Temporary
)

func (r RestartType) Valid() bool { return r >= Permanent && r <= Temporary }

func (r RestartType) String() string {
	switch r {
	case Permanent:
		return "permanent"
	case Transient:
		return "transient"
	case Temporary:
		return "temporary"
	}
	return fmt.Sprintf("RestartType(%d)", int(r))
}

// Backoff is the delay between a failure and the restart that follows it:
// exponential growth with jitter, implemented with
// github.com/cenkalti/backoff/v4.
//
// The n-th consecutive restart waits InitialInterval*Multiplier^(n-1), capped at
// MaxInterval, then randomized to within ±RandomizationFactor of that value and
// capped at MaxInterval again (so MaxInterval really is the longest delay).
type Backoff struct {
	InitialInterval     time.Duration
	MaxInterval         time.Duration
	Multiplier          float64
	RandomizationFactor float64 // 0 disables jitter (deterministic tests)
	// ResetAfter: a child that stayed up at least this long before failing
	// starts again from InitialInterval. 0 never resets.
	ResetAfter time.Duration
}

// Policy is the supervision policy of one Supervisor: pure data, validated by
// Validate.
type Policy struct {
	Strategy Strategy
	// Intensity is the number of restarts of one child allowed within
	// Window; the failure that would be restart Intensity+1 within the
	// sliding Window is not restarted and escalates instead. 0 means
	// every failure escalates.
	Intensity int
	Window    time.Duration
	Backoff   Backoff
}

// DefaultPolicy is one-for-one, 3 restarts per child within 30s, backoff
// 250ms doubling to 30s with ±25% jitter, reset after 60s of uptime
// (where hollywood's own restart sleeps a fixed delay on the actor's
// goroutine).
func DefaultPolicy() Policy {
	return Policy{
		Strategy:  OneForOne,
		Intensity: 3,
		Window:    30 * time.Second,
		Backoff: Backoff{
			InitialInterval:     250 * time.Millisecond,
			MaxInterval:         30 * time.Second,
			Multiplier:          2,
			RandomizationFactor: 0.25,
			ResetAfter:          60 * time.Second,
		},
	}
}

// Validate reports every problem of the policy at once.
func (p Policy) Validate() error {
	var errs []error
	if !p.Strategy.Valid() {
		errs = append(errs, fmt.Errorf("strategy %v is not one_for_one or rest_for_one", p.Strategy))
	}
	if p.Intensity < 0 {
		errs = append(errs, fmt.Errorf("intensity %d is negative", p.Intensity))
	}
	if p.Window <= 0 {
		errs = append(errs, fmt.Errorf("window %v must be positive", p.Window))
	}
	b := p.Backoff
	if b.InitialInterval < 0 {
		errs = append(errs, fmt.Errorf("backoff initial interval %v is negative", b.InitialInterval))
	}
	if b.MaxInterval < b.InitialInterval {
		errs = append(errs, fmt.Errorf("backoff max interval %v is below the initial interval %v", b.MaxInterval, b.InitialInterval))
	}
	if b.Multiplier < 1 {
		errs = append(errs, fmt.Errorf("backoff multiplier %v is below 1", b.Multiplier))
	}
	if b.RandomizationFactor < 0 || b.RandomizationFactor >= 1 {
		errs = append(errs, fmt.Errorf("backoff randomization factor %v is outside [0, 1)", b.RandomizationFactor))
	}
	if b.ResetAfter < 0 {
		errs = append(errs, fmt.Errorf("backoff reset-after %v is negative", b.ResetAfter))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("supervise: invalid policy: %w", err)
	}
	return nil
}
