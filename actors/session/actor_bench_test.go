package session

import (
	"fmt"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/codesession/codesession/actors/store"
	"github.com/codesession/codesession/actors/supervise"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/script"
)

// BenchmarkActorTurn drives whole turns through a session actor on a real
// hollywood engine, as a daemon's session runs them: guidance queued, the
// script backend's 20 events (thinking, six Read calls and their results,
// the closing text, the turn's end), each batch appended by the session
// itself on a pipelining memory store, the result read. Hollywood starts a
// goroutine each time an idle actor gets a message, so each wake-up
// starts on a small stack and grows it as deep as the message's handling
// goes: run with GODEBUG=adaptivestackstart=0 (every goroutine starts at
// 2 KiB, the low end of what the 10,000-session bench saw) and
// -cpuprofile to see runtime.copystack's share. ns/event divides by the
// turn's events the store took.
func BenchmarkActorTurn(b *testing.B) {
	e, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		b.Fatal(err)
	}
	registry := e.SpawnFunc(func(*actor.Context) {}, "registry")
	started := make(chan Result[messages.StartResult], 1)
	var steps []script.Step
	for i := range 6 {
		steps = append(steps, script.Thinking(fmt.Sprintf("step %d", i)),
			script.Tool("Read", map[string]string{"file_path": "a.go"}, "package a\n"))
	}
	steps = append(steps, script.Text("Done."))
	sc := &script.Scenario{Fallback: &script.Turn{Steps: steps}}
	st := &reportingPipeliner{Store: store.NewMemory()}
	spec := testSpec()
	spec.Cwd = b.TempDir()
	pid := e.Spawn(NewProducer(Options{
		Spec: spec, Transport: script.New(script.WithScenario(sc)), Store: st,
		Policy: supervise.DefaultPolicy(), ShutdownTimeout: 5 * time.Second, Registry: registry, StartReply: started,
	}), "session")
	if r := <-started; r.Err != nil {
		b.Fatal(r.Err)
	}
	read := func(token uint64) {
		reply := make(chan Result[messages.TurnResult], 1)
		e.Send(pid, OpReadTurn{Token: token, Op: messages.ReadTurn{SessionID: testSessionID}, Reply: reply})
		select {
		case r := <-reply:
			if r.Err != nil || r.Val.Kind != messages.KindTurnComplete {
				b.Fatalf("read-turn %d: %+v %v", token, r.Val, r.Err)
			}
		case <-time.After(time.Minute):
			b.Fatal("read-turn was not answered")
		}
	}
	read(1)
	seqBefore := st.lastSeq(b)
	token := uint64(1)
	b.ReportAllocs()
	for b.Loop() {
		token++
		reply := make(chan Result[messages.OKResult], 1)
		e.Send(pid, OpGuide{Op: messages.Guide{SessionID: testSessionID, Text: "next", Mode: messages.GuideQueue}, Reply: reply})
		if r := <-reply; r.Err != nil {
			b.Fatal(r.Err)
		}
		read(token)
	}
	events := st.lastSeq(b) - seqBefore
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
	<-e.Poison(pid).Done()
}

// lastSeq is the last seq the store holds of the bench's session.
func (p *reportingPipeliner) lastSeq(b *testing.B) uint64 {
	b.Helper()
	seq, err := p.LastSeq(b.Context(), testSessionID)
	if err != nil {
		b.Fatal(err)
	}
	return seq
}
