package session

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/supervise"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/script"
)

// reportingPipeliner is a store.Pipeliner over a memory store: each
// StartAppendThen writes its batch at once and reports it from one
// goroutine of its own, in the order started, as the file store's applier
// does. Its panicAt-th call (from 1) panics after the batch landed and its
// report was queued.
type reportingPipeliner struct {
	store.Store
	mu      sync.Mutex
	reports chan func()
	calls   int
	panicAt int
	// panicked is the batch of the call that panicked
	panicked []messages.PersistedEvent
}

func (p *reportingPipeliner) StartAppend(ctx context.Context, sid string, evs []messages.PersistedEvent, rec *messages.SessionRecord) func() error {
	ch := make(chan error, 1)
	p.StartAppendThen(ctx, sid, evs, rec, func(err error) { ch <- err })
	return func() error { return <-ch }
}

func (p *reportingPipeliner) StartAppendThen(ctx context.Context, sid string, evs []messages.PersistedEvent, rec *messages.SessionRecord, done func(error)) {
	p.mu.Lock()
	if p.reports == nil {
		p.reports = make(chan func(), 1024)
		go func() {
			for r := range p.reports {
				r()
			}
		}()
	}
	var err error
	if rec != nil {
		err = p.Store.AppendRecord(ctx, sid, evs, *rec)
	} else {
		err = p.Store.Append(ctx, sid, evs)
	}
	p.calls++
	boom := p.calls == p.panicAt
	if boom {
		p.panicked = evs
	}
	p.reports <- func() { done(err) }
	p.mu.Unlock()
	if boom {
		panic("the store broke after queueing the batch")
	}
}

// childRequests are the persist requests a session's persist child got.
type childRequests struct {
	mu   sync.Mutex
	reqs []persistReq
}

func (r *childRequests) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// firstSeqs is each request's first event's seq (0: no events).
func (r *childRequests) firstSeqs() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	seqs := make([]uint64, len(r.reqs))
	for i, req := range r.reqs {
		if len(req.events) > 0 {
			seqs[i] = req.events[0].Seq
		}
	}
	return seqs
}

// directSession runs a session actor on st whose backend answers every
// turn with a text, recording the persist requests its persist child gets
// (and handing each to onChild, which may panic to fail the child).
func directSession(t *testing.T, st store.Store, onChild ...func(persistReq)) (e *actor.Engine, pid *actor.PID, toChild *childRequests) {
	t.Helper()
	e, err := actor.NewEngine(actor.NewEngineConfig())
	require.NoError(t, err)
	registry := e.SpawnFunc(func(*actor.Context) {}, "registry")
	toChild = new(childRequests)
	started := make(chan Result[messages.StartResult], 1)
	sc := &script.Scenario{Fallback: &script.Turn{Steps: []script.Step{script.Thinking("hm"), script.Text("ok")}}}
	spec := testSpec()
	spec.Cwd = t.TempDir()
	pid = e.Spawn(NewProducer(Options{
		Spec: spec, Transport: script.New(script.WithScenario(sc)), Store: st,
		Policy: supervise.DefaultPolicy(), ShutdownTimeout: 5 * time.Second, Registry: registry, StartReply: started,
		Inject: func(name string, msg any) {
			if req, ok := msg.(persistReq); ok && name == ChildPersist {
				toChild.mu.Lock()
				toChild.reqs = append(toChild.reqs, req)
				toChild.mu.Unlock()
				for _, f := range onChild {
					f(req)
				}
			}
		},
	}), "session")
	select {
	case r := <-started:
		require.NoError(t, r.Err)
	case <-time.After(time.Minute):
		t.Fatal("the session did not start")
	}
	return e, pid, toChild
}

// waitTurnEnd waits until the store holds the first turn's end, and
// returns the session's log, checked gapless.
func waitTurnEnd(t *testing.T, st store.Store) []messages.PersistedEvent {
	t.Helper()
	var evs []messages.PersistedEvent
	require.Eventually(t, func() bool {
		var err error
		evs, err = st.ReadEvents(context.Background(), testSessionID, 0, 0)
		require.NoError(t, err)
		for _, ev := range evs {
			if ev.Event.Type == messages.EvTurnEnd {
				return true
			}
		}
		return false
	}, time.Minute, 5*time.Millisecond)
	for i, ev := range evs {
		require.EqualValues(t, i+1, ev.Seq, "the log is gapless, without duplicates")
	}
	return evs
}

// TestSessionStartsItsAppendsItself: on a store that pipelines appends the
// session starts each append itself; its persist child gets only the
// record's creation (each append used to cost a hop through the child).
func TestSessionStartsItsAppendsItself(t *testing.T) {
	st := &reportingPipeliner{Store: store.NewMemory()}
	e, pid, toChild := directSession(t, st)
	evs := waitTurnEnd(t, st)
	assert.GreaterOrEqual(t, len(evs), 4, "turn_started, thinking, text, turn_end")
	assert.Equal(t, 1, toChild.count(), "the persist child got the create only")
	st.mu.Lock()
	assert.GreaterOrEqual(t, st.calls, 1, "the appends were pipelined")
	st.mu.Unlock()
	<-e.Poison(pid).Done()
}

// TestStorePanicOnTheSessionsAppendGoesThroughItsChild: a store that panics
// in the StartAppendThen the session called itself (after the batch
// landed) does not fail the session: the request goes to the persist
// child, which re-reads LastSeq and writes what did not land; the store's
// late report of the panicked batch sends no second ack (the log is
// gapless and the turn completes). With two requests in flight
// (persistDepth) the session may send its child more while the child's is
// unanswered; the first after the create is the one the store panicked on.
func TestStorePanicOnTheSessionsAppendGoesThroughItsChild(t *testing.T) {
	st := &reportingPipeliner{Store: store.NewMemory(), panicAt: 1}
	e, pid, toChild := directSession(t, st)
	waitTurnEnd(t, st)
	seqs := toChild.firstSeqs()
	require.GreaterOrEqual(t, len(seqs), 2, "the create, then the request the store panicked on")
	st.mu.Lock()
	require.NotEmpty(t, st.panicked)
	assert.Equal(t, st.panicked[0].Seq, seqs[1], "the child got the batch the store panicked on")
	st.mu.Unlock()
	<-e.Poison(pid).Done()
}
