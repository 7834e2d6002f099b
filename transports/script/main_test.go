package script

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine (a session left open, a
// delay timer) outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
