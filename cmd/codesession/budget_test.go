package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// budgetScenario: each turn writes a file and costs 30 scripted cents.
const budgetScenario = `{"turns": [
  {"costUsd": 0.3, "steps": [{"write": {"path": "one.txt", "content": "1\n"}}, {"text": "one"}]},
  {"costUsd": 0.3, "steps": [{"write": {"path": "two.txt", "content": "2\n"}}, {"text": "two"}]},
  {"costUsd": 0.3, "steps": [{"text": "three"}]}
]}`

// run --max-cost-usd: the turn whose cost reaches the budget ends the run
// with max_budget (exit 0, an inferred success: it changed files), the
// guidance left is reported unsent, and the budget is on the record and in ls.
func TestRunStopsAtItsBudget(t *testing.T) {
	t.Parallel()
	work, home := t.TempDir(), t.TempDir()
	res := runCLI(t, invocation{env: map[string]string{"CODESESSION_HOME": home}},
		"run", "--backend", "script", "--json", "--cwd", work, "--max-cost-usd", "0.5",
		"--guide", "second", "--guide", "third",
		"--env", "CODESESSION_SCRIPT="+writeScenario(t, budgetScenario), "write files")
	require.Equal(t, exitOK, res.code, "stderr: %s", res.stderr)
	results, stopped := jsonLines(t, res.stdout)
	assert.Equal(t, []messages.TurnKind{kDone, messages.KindMaxBudget}, kinds(results))
	assert.InDelta(t, 0.6, results[1].CostUSD, 1e-9)
	assert.Equal(t, messages.OutcomeSuccess, stopped.Outcome)
	assert.NoFileExists(t, filepath.Join(work, "three.txt"))
	assert.Contains(t, res.stderr, "1 guidance message(s) were not sent")

	meta, err := os.ReadFile(filepath.Join(home, "sessions", results[0].SessionID, "meta.json"))
	require.NoError(t, err)
	var rec messages.SessionRecord
	require.NoError(t, json.Unmarshal(meta, &rec))
	assert.InDelta(t, 0.5, rec.MaxCostUSD, 1e-9)
	assert.InDelta(t, 0.6, rec.CostUSD, 1e-9)

	// the daemon serves the same home: ls and show give the spend against the budget
	cli, _ := consoleDaemon(t, home)
	ls := cli("ls")
	require.Equal(t, exitOK, ls.code, ls.stderr)
	assert.Contains(t, ls.stdout, "$0.6000/$0.50", "ls shows the spend against the budget")
	show := cli("show", results[0].SessionID)
	require.Equal(t, exitOK, show.code, show.stderr)
	assert.Contains(t, show.stdout, "cost $0.6000 (budget $0.50)")

	human := runCLI(t, invocation{env: map[string]string{"CODESESSION_HOME": t.TempDir()}},
		"run", "--backend", "script", "--cwd", t.TempDir(), "--max-cost-usd", "0.2",
		"--env", "CODESESSION_SCRIPT="+writeScenario(t, budgetScenario), "write files")
	require.Equal(t, exitOK, human.code, human.stderr)
	assert.Contains(t, human.stdout, "budget $0.20")
	assert.Contains(t, human.stdout, "max_budget")

	bad := runCLI(t, invocation{}, "run", "--backend", "script", "--max-cost-usd", "-1", "x")
	assert.Equal(t, exitUsage, bad.code)
	assert.Contains(t, bad.stderr, "--max-cost-usd")
}
