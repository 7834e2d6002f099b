package actors

import (
	"fmt"
	"os/exec"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

// preflighter is a transport that can tell, before a session exists, that
// Open would refuse its configuration (a missing scenario file, no API key).
type preflighter interface {
	Preflight(spec transports.SessionSpec) error
}

// binaryFinder is a CLI transport: Binary says which executable it would run.
type binaryFinder interface {
	Binary(env []string) (string, error)
}

// preflight refuses a start whose backend cannot run as configured, before
// the registry creates a record: a configuration problem is the caller's
// to fix (invalid, exit 2), never a failed session to clean up.
func preflight(t transports.Transport, spec transports.SessionSpec) error {
	const op = messages.OpStart
	id := t.Descriptor().ID
	// a wrapper (containment) hides its backend's abilities: ask the backend
	for {
		w, ok := t.(interface{ Unwrap() transports.Transport })
		if !ok {
			break
		}
		t = w.Unwrap()
	}
	if b, ok := t.(binaryFinder); ok {
		bin, err := b.Binary(spec.Env)
		if err != nil {
			return &messages.Error{Code: messages.CodeInvalid, Op: op, Field: "backend", Message: err.Error(), Err: err}
		}
		if _, err := exec.LookPath(bin); err != nil {
			return &messages.Error{Code: messages.CodeInvalid, Op: op, Field: "backend",
				Message: fmt.Sprintf("backend %s: %s is not an executable file here", id, bin), Err: err}
		}
	}
	if p, ok := t.(preflighter); ok {
		if err := p.Preflight(spec); err != nil {
			e := *messages.AsError(op, err)
			e.Code, e.Op = messages.CodeInvalid, op
			return &e
		}
	}
	return nil
}
