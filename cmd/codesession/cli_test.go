package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// result is one run of the CLI.
type result struct {
	code           int
	stdout, stderr string
}

// invocation describes a run of the CLI: its environment (CODESESSION_HOME
// defaults to a fresh temp dir, so nothing touches the real home) and stdin.
type invocation struct {
	env   map[string]string
	stdin string
}

func runCLI(t *testing.T, inv invocation, args ...string) result {
	t.Helper()
	env := map[string]string{}
	for k, v := range inv.env {
		env[k] = v
	}
	if _, ok := env["CODESESSION_HOME"]; !ok {
		env["CODESESSION_HOME"] = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// locked: the runtime's logger writes stderr from its own goroutines
	// (os.Stderr takes that; a bytes.Buffer races)
	var stdout, stderr syncBuffer
	code := run(ctx, args, func(k string) string { return env[k] }, strings.NewReader(inv.stdin), &stdout, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// writeScenario writes a scenario file into a fresh temp dir and returns its path.
func writeScenario(t *testing.T, scenario string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scenario.json")
	require.NoError(t, os.WriteFile(path, []byte(scenario), 0o644))
	return path
}

// jsonLines decodes run --json output strictly: every line but the last is
// a valid messages.TurnResult, the last is the stopped line.
func jsonLines(t *testing.T, stdout string) ([]messages.TurnResult, stoppedLine) {
	t.Helper()
	var results []messages.TurnResult
	var stopped stoppedLine
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, lines, "no JSON lines on stdout")
	for i, line := range lines {
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if i == len(lines)-1 {
			require.NoError(t, dec.Decode(&stopped), "the last line is the stopped line: %s", line)
			require.Equal(t, stoppedKind, stopped.Kind, line)
			continue
		}
		var r messages.TurnResult
		require.NoError(t, dec.Decode(&r), "line %d is a TurnResult: %s", i+1, line)
		require.NoError(t, r.Validate(), "line %d: %s", i+1, line)
		results = append(results, r)
	}
	return results, stopped
}

func kinds(rs []messages.TurnResult) []messages.TurnKind {
	out := make([]messages.TurnKind, len(rs))
	for i, r := range rs {
		out[i] = r.Kind
	}
	return out
}

const (
	kClar = messages.KindClarification
	kDone = messages.KindTurnComplete
)

// clarifyScenario: turn 1 writes hello.txt and asks for a Bash call; turn 2
// (input containing "second") asks to write denied.txt; turn 3 (input
// containing "third") only talks.
const clarifyScenario = `{"turns": [
  {"costUsd": 0.01, "steps": [
    {"text": "starting"},
    {"write": {"path": "hello.txt", "content": "hi\n"}},
    {"tool": {"name": "Bash", "input": {"command": "ls"}, "output": "hello.txt", "ask": true}},
    {"text": "turn one done"}]},
  {"match": "second", "steps": [
    {"write": {"path": "denied.txt", "content": "no\n", "ask": true}},
    {"text": "turn two done"}]},
  {"match": "third", "steps": [{"text": "turn three done"}]}
]}`

func TestRunJSONAnswersAndGuides(t *testing.T) {
	t.Parallel()
	work, home := t.TempDir(), t.TempDir()
	sc := writeScenario(t, clarifyScenario)
	res := runCLI(t, invocation{env: map[string]string{"CODESESSION_HOME": home}, stdin: "y\nnot that file\n"},
		"run", "--backend", "script", "--json", "--cwd", work, "--answer", "ask",
		"--guide", "now the second file", "--guide", "and a third thing",
		"--env", "CODESESSION_SCRIPT="+sc, "write hello")
	require.Equal(t, exitOK, res.code, "stderr: %s", res.stderr)

	results, stopped := jsonLines(t, res.stdout)
	assert.Equal(t, []messages.TurnKind{kClar, kDone, kClar, kDone, kDone}, kinds(results))
	assert.Equal(t, []int{1, 1, 2, 2, 3}, []int{results[0].Turn, results[1].Turn, results[2].Turn, results[3].Turn, results[4].Turn})
	assert.Equal(t, "Bash", results[0].ToolName)
	assert.Equal(t, "turn one done", results[1].Text)
	assert.Equal(t, "Write", results[2].ToolName)
	assert.Equal(t, "turn two done", results[3].Text)
	assert.Equal(t, "turn three done", results[4].Text)
	sid := results[0].SessionID
	for _, r := range results {
		assert.Equal(t, sid, r.SessionID)
	}
	assert.Equal(t, sid, stopped.SessionID)
	assert.Equal(t, messages.OutcomeSuccess, stopped.Outcome)

	// the first answer allowed the Bash call, the second denied the write with the typed reason
	assert.FileExists(t, filepath.Join(work, "hello.txt"))
	assert.NoFileExists(t, filepath.Join(work, "denied.txt"))
	var deny, guide string
	for _, h := range results[3].RoundHistory {
		switch h.Kind {
		case messages.HistDeny:
			deny = h.Text
		case messages.HistGuidance:
			guide = h.Text
		}
	}
	assert.Contains(t, deny, "not that file")
	assert.Contains(t, guide, "now the second file")
	assert.Contains(t, res.stderr, "Allow Bash", "ask prompts on stderr, keeping stdout JSON")

	// the session is durable in the home
	meta, err := os.ReadFile(filepath.Join(home, "sessions", sid, "meta.json"))
	require.NoError(t, err)
	var rec messages.SessionRecord
	require.NoError(t, json.Unmarshal(meta, &rec))
	assert.Equal(t, messages.StatusEnded, rec.Status)
	assert.Equal(t, messages.OutcomeSuccess, rec.Outcome)
	assert.FileExists(t, filepath.Join(home, "sessions", sid, "events.jsonl"))
}

func TestRunAnswerPolicies(t *testing.T) {
	t.Parallel()
	const scenario = `{"turns": [{"steps": [
	  {"write": {"path": "asked.txt", "content": "x\n", "ask": true}},
	  {"text": "done"}]}]}`
	for _, tc := range []struct {
		name    string
		flags   []string
		written bool
	}{
		{"allow", []string{"--answer", "allow"}, true},
		{"deny", []string{"--answer", "deny"}, false},
		{"default denies", nil, false},
	} {
		// a denied write leaves a brief that asked for it unmet: the
		// inferred verdict is failed and run exits by it (learning.Infer)
		wantCode, wantOutcome := exitOK, messages.OutcomeSuccess
		if !tc.written {
			wantCode, wantOutcome = exitFailed, messages.OutcomeFailed
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			work := t.TempDir()
			args := append([]string{"run", "--backend", "script", "--json", "--cwd", work,
				"--env", "CODESESSION_SCRIPT=" + writeScenario(t, scenario)}, tc.flags...)
			res := runCLI(t, invocation{}, append(args, "write the file")...)
			require.Equal(t, wantCode, res.code, "stderr: %s", res.stderr)
			results, stopped := jsonLines(t, res.stdout)
			require.Equal(t, []messages.TurnKind{kClar, kDone}, kinds(results))
			assert.Equal(t, wantOutcome, stopped.Outcome)
			if tc.written {
				assert.FileExists(t, filepath.Join(work, "asked.txt"))
			} else {
				assert.NoFileExists(t, filepath.Join(work, "asked.txt"))
				require.Len(t, results[1].Actions, 1)
				assert.True(t, results[1].Actions[0].IsError)
				assert.Contains(t, results[1].Actions[0].Result, "denied")
			}
		})
	}
}

func TestRunHumanOutput(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	sc := writeScenario(t, clarifyScenario)
	res := runCLI(t, invocation{}, "run", "--backend", "script", "--cwd", work,
		"--guide", "the second file", "--env", "CODESESSION_SCRIPT="+sc, "write hello")
	require.Equal(t, exitOK, res.code, "stderr: %s", res.stderr)
	for _, want := range []string{
		"SCRIPTED",
		"== turn 1: clarification",
		"Bash asks permission",
		"answered deny",
		"== turn 1: turn_complete",
		"Write hello.txt",
		"-> guidance for the next turn: the second file",
		"== turn 2: turn_complete",
		"outcome success",
	} {
		assert.Contains(t, res.stdout, want)
	}
	assert.True(t, strings.HasPrefix(lastLine(res.stdout), "stopped session "), res.stdout)
}

func TestRunGuidesLeftOverAreReported(t *testing.T) {
	t.Parallel()
	sc := writeScenario(t, `{"turns": [{"steps": [{"end": "all done, closing"}]}]}`)
	res := runCLI(t, invocation{}, "run", "--backend", "script", "--json", "--cwd", t.TempDir(),
		"--guide", "never sent", "--env", "CODESESSION_SCRIPT="+sc, "do it")
	// the agent ended without changing anything for a brief that asked for
	// work: an honest failed verdict, and run exits by it
	require.Equal(t, exitFailed, res.code, "stderr: %s", res.stderr)
	results, stopped := jsonLines(t, res.stdout)
	assert.Equal(t, []messages.TurnKind{messages.KindEnded}, kinds(results))
	assert.Equal(t, messages.OutcomeFailed, stopped.Outcome)
	assert.Contains(t, res.stderr, "1 guidance message(s) were not sent")
}

func TestRunFailedSessionExits1(t *testing.T) {
	t.Parallel()
	sc := writeScenario(t, `{"turns": [{"steps": [{"text": "trying"}, {"fail": "the build broke"}]}]}`)
	res := runCLI(t, invocation{}, "run", "--backend", "script", "--json", "--cwd", t.TempDir(),
		"--guide", "unused", "--env", "CODESESSION_SCRIPT="+sc, "build it")
	assert.Equal(t, exitFailed, res.code, "stderr: %s", res.stderr)
	results, stopped := jsonLines(t, res.stdout)
	require.Equal(t, []messages.TurnKind{messages.KindError}, kinds(results))
	assert.Contains(t, results[0].Message, "the build broke")
	assert.Equal(t, messages.OutcomeFailed, stopped.Outcome)
	assert.Contains(t, res.stderr, "ended in error")
	assert.NotContains(t, res.stderr, "Try:")
}

func TestRunReadTimeoutStopsTheSession(t *testing.T) {
	t.Parallel()
	sc := writeScenario(t, `{"turns": [{"steps": [{"text": "thinking hard"}, {"delay": "10m"}, {"text": "never"}]}]}`)
	res := runCLI(t, invocation{}, "run", "--backend", "script", "--json", "--cwd", t.TempDir(),
		"--timeout", "300ms", "--env", "CODESESSION_SCRIPT="+sc, "take forever")
	assert.Equal(t, exitFailed, res.code, "stderr: %s", res.stderr)
	results, stopped := jsonLines(t, res.stdout)
	assert.Empty(t, results)
	assert.Equal(t, messages.OutcomeAborted, stopped.Outcome, "a turn still running at stop is aborted")
	assert.Contains(t, res.stderr, "timeout")
}

func TestRunSkippingFlags(t *testing.T) {
	t.Parallel()
	// ParseFlags is apart from exec: a test can build the command directly.
	home, work := t.TempDir(), t.TempDir()
	c := &runCmd{
		cfg:     configFlags{home: home, env: map[string]string{"CODESESSION_SCRIPT": "builtin:echo"}},
		start:   messages.Start{Brief: "say hi", Backend: "script", Cwd: work},
		json:    true,
		answer:  answerDeny,
		timeout: time.Minute,
	}
	var stdout, stderr bytes.Buffer
	s := &streams{getenv: func(string) string { return "" }, stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
	require.NoError(t, c.exec(context.Background(), s), stderr.String())
	results, stopped := jsonLines(t, stdout.String())
	require.Equal(t, []messages.TurnKind{kDone}, kinds(results))
	assert.Contains(t, results[0].Text, "Scripted reply to turn 1: say hi")
	assert.Equal(t, messages.OutcomeSuccess, stopped.Outcome)
}

func TestParseRunFlags(t *testing.T) {
	t.Parallel()
	c, err := parseRunFlags([]string{"--backend", "script", "--posture", "bypass", "--max-posture", "full",
		"--model", "cheap", "--effort", "high", "--max-rounds", "3", "--env", "A=1", "--env", "B=x=y",
		"--guide", "one, two", "--guide", "three", "--answer", "allow", "--timeout", "5s", "--json",
		"--home", "h", "--config", "c.json", "the brief"})
	require.NoError(t, err)
	assert.Equal(t, messages.Start{Brief: "the brief", Backend: "script", InitialPosture: messages.PostureFull,
		MaxPosture: messages.PostureFull, Model: "cheap", Effort: messages.EffortHigh, MaxRounds: 3}, c.start)
	assert.Equal(t, map[string]string{"A": "1", "B": "x=y"}, c.cfg.env)
	assert.Equal(t, []string{"one, two", "three"}, c.guides, "a guide may contain commas")
	assert.Equal(t, answerAllow, c.answer)
	assert.Equal(t, 5*time.Second, c.timeout)
	assert.True(t, c.json)
	assert.Equal(t, "h", c.cfg.home)
	assert.Equal(t, "c.json", c.cfg.path)

	c, err = parseRunFlags([]string{"brief"})
	require.NoError(t, err)
	assert.Equal(t, answerDeny, c.answer, "deny unless told otherwise")
	assert.Equal(t, 10*time.Minute, c.timeout)
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		hint string // the Try line
		msg  string // part of the error message
	}{
		{"no command", nil, "Try: codesession help", "no command"},
		{"unknown command", []string{"frobnicate"}, "Try: codesession help", "unknown command"},
		{"mistyped command", []string{"stpo", "x"}, "Try: codesession help", `unknown command "stpo" (did you mean "stop"?)`},
		{"far from any command", []string{"frobnicate"}, "Try: codesession help", `unknown command "frobnicate"` + "\n"},
		{"unknown flag", []string{"run", "--bogus", "x"}, "Try: codesession run --help", "unknown flag: --bogus"},
		{"missing brief", []string{"run", "--backend", "script"}, "Try: codesession run --help", "missing BRIEF"},
		{"empty brief", []string{"run", "  "}, "Try: codesession run --help", "empty"},
		{"two briefs", []string{"run", "fix", "it"}, "Try: codesession run --help", "quote the brief"},
		{"bad posture", []string{"run", "--posture", "sideways", "x"}, "Try: codesession run --help", "unknown posture"},
		{"bad max posture", []string{"run", "--max-posture", "x", "x"}, "Try: codesession run --help", "--max-posture"},
		{"posture above ceiling", []string{"run", "--posture", "full", "--max-posture", "plan", "x"}, "Try: codesession run --help", "above maxPosture"},
		{"env without =", []string{"run", "--env", "NOEQUALS", "x"}, "Try: codesession run --help", "want KEY=VALUE"},
		{"env without key", []string{"run", "--env", "=v", "x"}, "Try: codesession run --help", "want KEY=VALUE"},
		{"bad answer", []string{"run", "--answer", "maybe", "x"}, "Try: codesession run --help", "--answer"},
		{"bad effort", []string{"run", "--effort", "extreme", "x"}, "Try: codesession run --help", "unknown effort"},
		{"negative rounds", []string{"run", "--max-rounds", "-1", "x"}, "Try: codesession run --help", "negative"},
		{"zero timeout", []string{"run", "--timeout", "0s", "x"}, "Try: codesession run --help", "--timeout"},
		{"bad timeout", []string{"run", "--timeout", "soon", "x"}, "Try: codesession run --help", "--timeout"},
		{"empty guide", []string{"run", "--guide", " ", "x"}, "Try: codesession run --help", "--guide"},
		{"unknown backend", []string{"run", "--backend", "nope", "--cwd", os.TempDir(), "x"}, "Try: codesession run --help", "not registered"},
		{"missing cwd", []string{"run", "--backend", "script", "--cwd", "/nonexistent/codesession", "x"}, "Try: codesession run --help", "--cwd"},
		{"backends takes no args", []string{"backends", "extra"}, "Try: codesession backends --help", "no arguments"},
		{"backends unknown flag", []string{"backends", "--table"}, "Try: codesession backends --help", "unknown flag"},
		{"demo takes no args", []string{"demo", "extra"}, "Try: codesession demo --help", "no arguments"},
		{"demo backend", []string{"demo", "--backend", "codex"}, "Try: codesession demo --help", "the demo drives native or claude-code"},
		{"version takes no args", []string{"version", "x"}, "Try: codesession version --help", "no arguments"},
		{"help unknown topic", []string{"help", "nope"}, "Try: codesession help", "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := runCLI(t, invocation{}, tc.args...)
			assert.Equal(t, exitUsage, res.code, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
			assert.Contains(t, res.stderr, tc.msg)
			assert.Equal(t, tc.hint, lastLine(res.stderr))
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	res := runCLI(t, invocation{}, "help")
	require.Equal(t, exitOK, res.code)
	for _, c := range []string{"run", "backends", "demo", "version", "help"} {
		assert.Contains(t, res.stdout, "  "+c+" ")
	}
	for _, args := range [][]string{{"run", "--help"}, {"run", "-h"}, {"help", "run"}} {
		res := runCLI(t, invocation{}, args...)
		require.Equal(t, exitOK, res.code, "%v: %s", args, res.stderr)
		assert.Contains(t, res.stdout, "Usage: codesession run [flags] BRIEF", args)
		assert.Contains(t, res.stdout, "--answer", args)
		assert.Empty(t, res.stderr, args)
	}
	res = runCLI(t, invocation{}, "--help")
	assert.Equal(t, exitOK, res.code)
	assert.Contains(t, res.stdout, "Commands:")
}

func TestVersion(t *testing.T) {
	t.Parallel()
	res := runCLI(t, invocation{}, "version")
	require.Equal(t, exitOK, res.code)
	assert.Regexp(t, `^codesession \S+.* \(go1\.\d+`, res.stdout)
	flag := runCLI(t, invocation{}, "--version")
	require.Equal(t, exitOK, flag.code)
	assert.Equal(t, res.stdout, flag.stdout, "--version is the version command")
}

func TestBackends(t *testing.T) {
	t.Parallel()
	res := runCLI(t, invocation{}, "backends", "--json")
	require.Equal(t, exitOK, res.code, res.stderr)
	var list messages.ListBackendsResult
	dec := json.NewDecoder(strings.NewReader(res.stdout))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&list))
	var found bool
	for _, b := range list.Backends {
		if b.Descriptor.ID == "script" {
			found = true
			assert.True(t, b.Descriptor.Scripted, "the script backend is labelled scripted")
			assert.True(t, b.Availability.Available)
			assert.NotEmpty(t, b.Availability.Version)
		}
	}
	assert.True(t, found, "the script backend is listed: %s", res.stdout)

	res = runCLI(t, invocation{}, "backends")
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Contains(t, res.stdout, "BACKEND")
	assert.Regexp(t, `(?m)^script\s+script \(scripted test backend\)\s+yes\s+stream\s+yes\s+honoured\s+native\s+per-turn\s+per-turn\s+interrupt,posture,guide:interrupt/queue/steer\s+yes \(script/1\)$`, res.stdout)
	assert.Contains(t, res.stdout, "script: plan=plan default=default acceptEdits=acceptEdits full=full")
	assert.Contains(t, res.stdout, "script is SCRIPTED")
}

func TestDemo(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	res := runCLI(t, invocation{}, "demo", "--yes", "--json", "--home", home)
	require.Equal(t, exitOK, res.code, "stderr: %s", res.stderr)
	results, stopped := jsonLines(t, res.stdout)
	assert.Equal(t, []messages.TurnKind{kClar, kDone, kClar, kDone}, kinds(results))
	assert.Equal(t, messages.OutcomeSuccess, stopped.Outcome)
	assert.Contains(t, res.stderr, "SCRIPTED model server")
	assert.Contains(t, res.stderr, "hello_test.go", "the demo's agent really wrote its files")
	assert.Contains(t, res.stderr, `+func greeting() string { return "hello, world" }`, "the per-turn diff is printed")
	assert.Contains(t, res.stderr, "== diff of turn 2")
	assert.FileExists(t, filepath.Join(home, "sessions", stopped.SessionID, "meta.json"))
	assert.FileExists(t, filepath.Join(home, "sessions", stopped.SessionID, "events.jsonl"))
	assert.Contains(t, res.stderr, filepath.Join(home, "sessions", stopped.SessionID, "meta.json"))
	repo := field(res.stderr, "repository:")
	require.NotEmpty(t, repo)
	assert.NoDirExists(t, repo, "the temporary repository is removed without --keep")
}

func TestDemoKeep(t *testing.T) {
	t.Parallel()
	res := runCLI(t, invocation{}, "demo", "--yes", "--keep")
	repo, home := field(res.stdout, "repository:"), field(res.stdout, "home:")
	t.Cleanup(func() {
		for _, d := range []string{repo, home} {
			if strings.Contains(d, "codesession-demo-") {
				os.RemoveAll(d)
			}
		}
	})
	require.Equal(t, exitOK, res.code, "stderr: %s", res.stderr)
	for _, want := range []string{"SCRIPTED", "== turn 1: turn_complete", "== turn 2: turn_complete", "answered allow_once", "outcome success", "kept "} {
		assert.Contains(t, res.stdout, want)
	}
	b, err := os.ReadFile(filepath.Join(repo, "hello.go"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"hello, world"`, "the native agent's edit is in the repository")
	assert.FileExists(t, filepath.Join(repo, "hello_test.go"))
	if !strings.Contains(res.stdout, "git is not installed") {
		assert.DirExists(t, filepath.Join(repo, ".git"))
	}
	assert.DirExists(t, filepath.Join(home, "sessions"))
}

// TestDemoAnswersAtTheTerminal answers the demo's two questions from
// stdin: the first allowed, the second denied with a reason the agent hears.
func TestDemoAnswersAtTheTerminal(t *testing.T) {
	t.Parallel()
	res := runCLI(t, invocation{stdin: "y\nnot this time\n"}, "demo", "--keep")
	repo, home := field(res.stdout, "repository:"), field(res.stdout, "home:")
	t.Cleanup(func() {
		for _, d := range []string{repo, home} {
			if strings.Contains(d, "codesession-demo-") {
				os.RemoveAll(d)
			}
		}
	})
	require.Equal(t, exitOK, res.code, "stderr: %s\nstdout: %s", res.stderr, res.stdout)
	for _, want := range []string{"answered allow_once", "answered deny: not this time", "denied by the user: not this time"} {
		assert.Contains(t, res.stdout, want)
	}
	assert.Contains(t, res.stderr, "[y]es once", "the question is asked at the terminal")
	assert.NoFileExists(t, filepath.Join(repo, "hello_test.go"), "the denied write did not happen")
}

// field returns the rest of the first line of s that starts with prefix, trimmed.
func field(s, prefix string) string {
	for _, line := range strings.Split(s, "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestConfigLayers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	unknownKey := write("unknown.json", `{"defaultBackend": "script", "bogusKey": 1}`)
	badValue := write("bad.json", `{"logLevel": "loud", "defaultMaxRounds": -2}`)
	scriptDefault := write("script.json", `{"defaultBackend": "script"}`)
	homeWithBadFile := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(homeWithBadFile, "config.json"), []byte(`{"nope": true}`), 0o644))
	echo := "CODESESSION_SCRIPT=builtin:echo"

	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		msg  string
	}{
		{"unknown key in --config", nil, []string{"run", "--config", unknownKey, "x"}, exitUsage, `unknown field "bogusKey"`},
		{"unknown key through backends", nil, []string{"backends", "--config", unknownKey}, exitUsage, "bogusKey"},
		{"unknown key via CODESESSION_CONFIG", map[string]string{"CODESESSION_CONFIG": unknownKey}, []string{"run", "x"}, exitUsage, "bogusKey"},
		{"unknown key in <home>/config.json via --home", nil, []string{"run", "--home", homeWithBadFile, "x"}, exitUsage, `unknown field "nope"`},
		{"unknown key in $CODESESSION_HOME/config.json", map[string]string{"CODESESSION_HOME": homeWithBadFile}, []string{"run", "x"}, exitUsage, `unknown field "nope"`},
		{"missing --config file", nil, []string{"run", "--config", filepath.Join(dir, "absent.json"), "x"}, exitUsage, "absent.json"},
		{"field errors name the fields", nil, []string{"run", "--config", badValue, "x"}, exitUsage, "defaultMaxRounds"},
		{"bad environment value", map[string]string{"CODESESSION_MAX_ROUNDS": "many"}, []string{"run", "x"}, exitUsage, "CODESESSION_MAX_ROUNDS"},
		{"file sets the backend", nil, []string{"run", "--config", scriptDefault, "--cwd", dir, "--env", echo, "what is x?"}, exitOK, ""},
		{"environment beats the file", map[string]string{"CODESESSION_BACKEND": "nope"}, []string{"run", "--config", scriptDefault, "--cwd", dir, "--env", echo, "x"}, exitUsage, `backend "nope" is not registered`},
		{"flags beat the environment", map[string]string{"CODESESSION_BACKEND": "nope"}, []string{"run", "--config", scriptDefault, "--backend", "script", "--cwd", dir, "--env", echo, "what is x?"}, exitOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := runCLI(t, invocation{env: tc.env}, tc.args...)
			assert.Equal(t, tc.code, res.code, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
			assert.Contains(t, res.stderr, tc.msg)
		})
	}

	// Validate's field errors each get a line.
	res := runCLI(t, invocation{}, "run", "--config", badValue, "x")
	assert.Contains(t, res.stderr, "codesession run: config: logLevel:")
	assert.Contains(t, res.stderr, "codesession run: config: defaultMaxRounds:")
}

func TestPrompter(t *testing.T) {
	t.Parallel()
	clar := messages.TurnResult{Kind: kClar, ToolName: "Bash", ClarificationID: "c1", Input: json.RawMessage(`{"command":"ls"}`)}
	for _, tc := range []struct {
		in       string
		decision messages.Decision
		reason   string
	}{
		{"y\n", messages.DecisionAllowOnce, ""},
		{"YES\n", messages.DecisionAllowOnce, ""},
		{"a\n", messages.DecisionAllowSession, ""},
		{"always\n", messages.DecisionAllowSession, ""},
		{"n\n", messages.DecisionDeny, "denied at the terminal"},
		{"\n", messages.DecisionDeny, "denied at the terminal"},
		{"  use go test instead  \n", messages.DecisionDeny, "use go test instead"},
		{"no newline at the end", messages.DecisionDeny, "no newline at the end"},
		{"", messages.DecisionDeny, "no answer: the terminal's input was closed"},
	} {
		var w bytes.Buffer
		d, reason, err := newPrompter(strings.NewReader(tc.in), &w).ask(context.Background(), clar)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.decision, d, "input %q", tc.in)
		assert.Equal(t, tc.reason, reason, "input %q", tc.in)
		assert.Contains(t, w.String(), `Allow Bash {"command":"ls"}?`)
	}
}
