package actors

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine outlives the tests: every
// runtime the tests start is closed, and closing must stop every session,
// backend and timer.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
