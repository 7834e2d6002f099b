package claudecode

import (
	"testing"
	"time"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/cli"
)

// ClaudeBinaryForTest finds the real CLI for the external tests (see
// claudeBinary: skip without it, fail under CI=true).
func ClaudeBinaryForTest(t testing.TB) string { return claudeBinary(t) }

// WithTraceForTest sees, after the sink returned, every event a stdout
// line caused, with the time the line was read.
func WithTraceForTest(f func(readAt time.Time, ev messages.Event)) Option {
	return func(c *cli.Config) { c.Trace = f }
}
