// Package subprocesstest finds the program a live test drives: a
// backend's pinned CLI, or the browser of the web console's tests. Without
// it the test is skipped, except under CI=true, where every live test must
// run and a missing program fails it (.ci/run installs each one). It also
// keeps every core busy beside a live test (BusyEveryCore). It is imported
// by tests only.
package subprocesstest

import (
	"os"
	"os/exec"
	"testing"
)

// Find returns the program envVar names (which must exist), else the
// first of commands on PATH. Without one it skips t, or fails it under
// CI=true; install says how to get it ("npm install droid@0.215.0").
func Find(t testing.TB, envVar, install string, commands ...string) string {
	t.Helper()
	if b := os.Getenv(envVar); b != "" {
		if _, err := os.Stat(b); err != nil {
			t.Fatalf("%s=%s: %v", envVar, b, err)
		}
		return b
	}
	for _, c := range commands {
		if b, err := exec.LookPath(c); err == nil {
			return b
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but %s is missing: set %s (bash .ci/run installs it: %s)", commands[0], envVar, install)
	}
	t.Skipf("%s is not installed: set %s or put it on PATH to run the live tests (%s)", commands[0], envVar, install)
	return ""
}

// Missing reports that something a test needs is not on this machine (a
// program, /proc, a tmpfs it can mount): it skips t, or fails it under
// CI=true, where .ci/run provides every one of them and a skip would hide
// a test that never ran.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but "+format, args...)
	}
	t.Skipf(format, args...)
}

// Git returns the path of git, or reports it Missing.
func Git(t testing.TB) string {
	t.Helper()
	b, err := exec.LookPath("git")
	if err != nil {
		Missing(t, "git is not installed (the test needs real repositories)")
	}
	return b
}
