package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/learning/outcomes"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/modelmock"
)

// run records an outcome per session; outcomes, lessons and backends read
// them back; lessons distill asks the configured model (modelmock here).
func TestOutcomesAndLessonsCommands(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	env := map[string]string{"CODESESSION_HOME": home}
	echo := "CODESESSION_SCRIPT=builtin:echo"
	for _, brief := range []string{"what is x?", "change x"} {
		runCLI(t, invocation{env: env}, "run", "--backend", "script", "--cwd", t.TempDir(), "--env", echo, brief)
	}

	res := runCLI(t, invocation{env: env}, "outcomes", "--json")
	require.Equal(t, exitOK, res.code, res.stderr)
	var got []outcomes.Record
	for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
		var r outcomes.Record
		require.NoError(t, json.Unmarshal([]byte(line), &r))
		got = append(got, r)
	}
	require.Len(t, got, 2)
	assert.Equal(t, messages.OutcomeSuccess, got[0].Outcome, "a question answered")
	assert.Equal(t, messages.OutcomeFailed, got[1].Outcome, "a change asked for and none made")
	assert.True(t, got[1].Inferred)

	res = runCLI(t, invocation{env: env}, "outcomes", "--backend", "script", "--since", "1h")
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "success (inferred)")
	assert.Contains(t, res.stdout, "no file changed")
	res = runCLI(t, invocation{env: env}, "outcomes", "--backend", "codex")
	assert.Contains(t, res.stdout, "no outcomes recorded yet")
	res = runCLI(t, invocation{env: env}, "outcomes", "--since", "yesterday")
	assert.Equal(t, exitUsage, res.code)

	res = runCLI(t, invocation{env: env}, "backends")
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "script track record: script: 2 runs, 50% success, avg 1.0 rounds, last failure: the brief asked for changes and no file changed")
	assert.Contains(t, res.stdout, "script routing: model classes: cheap->script-cheap")

	res = runCLI(t, invocation{env: env}, "lessons")
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "no lessons yet")
	res = runCLI(t, invocation{env: env}, "lessons", "block")
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Empty(t, res.stdout)
	assert.Contains(t, res.stderr, "nothing is injected")
	res = runCLI(t, invocation{env: env}, "lessons", "forget")
	assert.Equal(t, exitUsage, res.code)

	// no model configured: the pass fails loudly and changes nothing
	res = runCLI(t, invocation{env: env}, "lessons", "distill")
	assert.Equal(t, exitFailed, res.code)

	srv, err := modelmock.Start(t, &modelmock.Scenario{Default: &modelmock.Step{Text: `{"lessons":[]}`}})
	require.NoError(t, err)
	env["ANTHROPIC_BASE_URL"], env["ANTHROPIC_API_KEY"] = srv.URL(), "sk-ant-test"
	res = runCLI(t, invocation{env: env}, "lessons", "distill")
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "distilled 2 new outcome(s) with claude-haiku-4-5")
	res = runCLI(t, invocation{env: env}, "lessons", "distill")
	assert.Contains(t, res.stdout, "distilled 0 new outcome(s)", "the cursor moved on")
}
