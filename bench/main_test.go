package bench

import (
	"os"
	"testing"
)

// TestMain lets this test binary be the feed's subscribers' child process:
// the feed tests re-run it with FeedChildEnv set.
func TestMain(m *testing.M) {
	FeedChildMain()
	os.Exit(m.Run())
}
