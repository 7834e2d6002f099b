package session

import "time"

// Lifecycle is where a session is in its life as an actor, beside the turn
// Phase: the release protocol is decided here, in the core, and the shell
// only carries out the LifeEffects it is handed.
//
//	running --BeginRelease--> stoppingChildren --ChildrenStopped--> persistingReleased
//	persistingReleased --(released durable)--> stoppingPersist --PersistStopped--> done
//	stoppingChildren|persistingReleased --ReleaseDeadline--> stoppingPersist (abandoned)
//	running --CreateFailed--> stoppingPersist (every child stopping)
type Lifecycle int

const (
	lifeInvalid Lifecycle = iota
	// LifeRunning: live; ops are served.
	LifeRunning
	// LifeStoppingChildren: released; transport and diff capture are stopping.
	LifeStoppingChildren
	// LifePersistingReleased: the released event is on its way to the store.
	LifePersistingReleased
	// LifeStoppingPersist: nothing more is written; persist is stopping.
	LifeStoppingPersist
	// LifeDone: the registry has been told; it stops the actor.
	LifeDone
)

func (l Lifecycle) String() string {
	switch l {
	case LifeRunning:
		return "running"
	case LifeStoppingChildren:
		return "stopping-children"
	case LifePersistingReleased:
		return "persisting-released"
	case LifeStoppingPersist:
		return "stopping-persist"
	case LifeDone:
		return "done"
	}
	return "invalid"
}

// Releasing reports a release under way or over (anything but running).
func (l Lifecycle) Releasing() bool { return l != LifeRunning }

// LifeEffect is a step of the session's end that the shell carries out.
type LifeEffect int

const (
	lifeEffectInvalid LifeEffect = iota
	// StopWorkers: stop transport then diff capture, then ChildrenStopped.
	StopWorkers
	// StopPersist: stop persist (nothing more to write), then PersistStopped.
	StopPersist
	// StopEverything: stop every child (a session never created), then
	// PersistStopped.
	StopEverything
	// ReportDone: tell the registry and answer the stop callers.
	ReportDone
)

func (e LifeEffect) String() string {
	switch e {
	case StopWorkers:
		return "stop-workers"
	case StopPersist:
		return "stop-persist"
	case StopEverything:
		return "stop-everything"
	case ReportDone:
		return "report-done"
	}
	return "invalid"
}

// Life returns the session's lifecycle state.
func (c *Core) Life() Lifecycle { return c.life }

// ReleaseAbandoned reports that a shutdown deadline passed before the
// released event was durable: the record is left for the boot sweep.
func (c *Core) ReleaseAbandoned() bool { return c.abandonedRelease }

func (c *Core) lifeTo(l Lifecycle, eff LifeEffect) {
	c.life = l
	c.out.Life = append(c.out.Life, eff)
}

// ChildrenStopped: transport and diff capture are gone, so nothing more
// comes from the backend: the released event, always the last, is emitted.
func (c *Core) ChildrenStopped(now time.Time) {
	if c.life != LifeStoppingChildren {
		return
	}
	c.releasedSeq = c.FinishRelease(now)
	c.life = LifePersistingReleased
	c.releasedDurable()
}

// releasedDurable moves on once the store holds the released event.
func (c *Core) releasedDurable() {
	if c.life == LifePersistingReleased && c.durableSeq >= c.releasedSeq {
		c.lifeTo(LifeStoppingPersist, StopPersist)
	}
}

// ReleaseDeadline gives up on a shutdown release that the store did not
// take in time: persist is stopped with the released event not durable,
// and nobody is told the session was released.
func (c *Core) ReleaseDeadline() {
	if c.life != LifeStoppingChildren && c.life != LifePersistingReleased {
		return
	}
	c.abandonedRelease = true
	c.lifeTo(LifeStoppingPersist, StopPersist)
}

// CreateFailed ends a session whose record could not be created.
func (c *Core) CreateFailed() {
	if c.life != LifeRunning || c.phase != PhaseStarting {
		return
	}
	c.lifeTo(LifeStoppingPersist, StopEverything)
}

// PersistStopped: the last child is gone; the registry is told.
func (c *Core) PersistStopped() {
	if c.life != LifeStoppingPersist {
		return
	}
	c.lifeTo(LifeDone, ReportDone)
}
