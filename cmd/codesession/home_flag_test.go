package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every command takes --home (issue 37): on the old code backends,
// modelmock, completion and version refused it as an unknown flag.
func TestEveryCommandTakesHome(t *testing.T) {
	t.Parallel()
	for _, c := range commands() {
		if c.name == "help" {
			continue // help prints help: it has no flags
		}
		fs := c.flags()
		assert.NotNil(t, fs.Lookup("home"), "%s has no --home", c.name)
	}
	home := t.TempDir()
	r := runCLI(t, invocation{}, "completion", "--home", home, "bash")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "codesession ls --home '"+home+"' -o id", "the script lists that home's sessions")
	assert.NotContains(t, strings.ReplaceAll(r.stdout, "ls --home", ""), "codesession ls -o id")

	r = runCLI(t, invocation{}, "backends", "--home", home, "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = runCLI(t, invocation{}, "version", "--home", home)
	require.Equal(t, exitOK, r.code, r.stderr)
}
