package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes what the package's tests share across tests once they
// are done: the codesession binary the containment tests build (120 MB a
// run, which no test's own cleanup owns).
func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		_ = os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}
