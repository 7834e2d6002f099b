package subprocess

import (
	"context"
	"reflect"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Step is one rung of an escalation: wait up to Wait for the process to
// end, then send Signal to its process group.
type Step struct {
	Wait   time.Duration
	Signal syscall.Signal
}

// SignalName is the signal as a person reads it: "SIGTERM".
func SignalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return sig.String()
}

// Signal sends sig to process group pgid; a group that is gone is no error
// worth reporting.
func Signal(pgid int, sig syscall.Signal) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig)
	}
}

// Escalate walks process group pgid up steps (an interrupt: SIGINT, then
// SIGTERM, then SIGKILL): each step waits up to its Wait, calls sending
// (when not nil) with the step and the time waited in all, and sends its
// Signal; sending runs first so that what it records is there before the
// process can die of the signal. Escalate returns at once, signalling no
// more, when any of until closes (the process exited, the turn ended, the
// session closed); nil channels never close.
func Escalate(pgid int, steps []Step, sending func(st Step, waited time.Duration), until ...<-chan struct{}) {
	cases := make([]reflect.SelectCase, 0, len(until)+1)
	for _, c := range until {
		if c != nil {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
		}
	}
	var waited time.Duration
	for _, st := range steps {
		t := time.NewTimer(st.Wait)
		chosen, _, _ := reflect.Select(append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)}))
		t.Stop()
		if chosen < len(cases) {
			return
		}
		// the timer won a tie, perhaps: an end that came meanwhile still wins
		if chosen, _, _ = reflect.Select(append(cases, reflect.SelectCase{Dir: reflect.SelectDefault})); chosen < len(cases) {
			return
		}
		waited += st.Wait
		if sending != nil {
			sending(st, waited)
		}
		Signal(pgid, st.Signal)
	}
}

// Stop ends a process whose input the caller has just closed (most CLIs
// save their state and exit at end of input): it walks process group pgid
// up steps until exited closes, each wait cut short once ctx ends, and
// then waits for exited. Nothing is sent once exited has closed; killing
// what the process left in its group is the caller's choice.
func Stop(ctx context.Context, pgid int, exited <-chan struct{}, steps ...Step) {
	for _, st := range steps {
		t := time.NewTimer(st.Wait)
		select {
		case <-exited:
			t.Stop()
			return
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		select {
		case <-exited:
			return
		default:
		}
		Signal(pgid, st.Signal)
	}
	<-exited
}
