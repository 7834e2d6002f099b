package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/claudecode"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/native"
)

// The demo's brief, its one follow-up guidance, and the files of its
// repository. The scripted model keys its answers on the brief and the
// guidance (demoBriefKey, demoGuideKey).
const (
	demoBrief    = "The greeting in hello.go says \"helo\": fix the typo, and tell me what you changed."
	demoGuide    = "Now add a small test for greeting() in hello_test.go."
	demoBriefKey = "fix the typo"
	demoGuideKey = "add a small test"
	demoModel    = "claude-demo-scripted"

	demoHelloBefore = "package main\n\nimport \"fmt\"\n\nfunc greeting() string { return \"helo, world\" }\n\nfunc main() { fmt.Println(greeting()) }\n"
	demoTest        = "package main\n\nimport \"testing\"\n\nfunc TestGreeting(t *testing.T) {\n\tif got := greeting(); got != \"hello, world\" {\n\t\tt.Fatalf(\"greeting() = %q, want %q\", got, \"hello, world\")\n\t}\n}\n"
)

// demoBackends are the backends the demo can drive against the scripted
// model: the in-process loop, and the agent CLIs that speak Anthropic
// Messages.
var demoBackends = []string{native.ID, claudecode.ID}

// demoCmd is the one-command main job for a fresh machine: a real agent
// loop (native, or an installed agent CLI) driven from brief to verdict in
// a throwaway git repository, against a scripted model server on loopback:
// no network, no API key.
type demoCmd struct {
	cfg     configFlags
	json    bool
	keep    bool
	yes     bool
	backend string
}

func (c *demoCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("demo")
	fs.BoolVar(&c.json, "json", false, "print one JSON object per line, like run --json")
	fs.BoolVar(&c.keep, "keep", false, "keep the temporary repository and home instead of removing them")
	fs.BoolVar(&c.yes, "yes", false, "allow the agent's permission questions without asking (for runs without a terminal)")
	fs.StringVar(&c.backend, "backend", native.ID, "the agent: "+strings.Join(demoBackends, " or ")+" (an installed CLI, driven against the same scripted model)")
	c.cfg.addHome(fs)
	c.cfg.addConfig(fs)
	c.cfg.addVerbose(fs)
	return fs
}

func demoCommand() command {
	return command{
		name:    "demo",
		summary: "drive a whole session of a real agent loop against a scripted model in a temporary git repository",
		usage:   "demo [--yes] [--backend native|claude-code] [--json] [--keep] [--home DIR]",
		flags:   func() *pflag.FlagSet { return (&demoCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseDemoFlags(args) },
	}
}

func parseDemoFlags(args []string) (*demoCmd, error) {
	c := &demoCmd{}
	fs := c.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef("demo", "takes no arguments, got %q", fs.Arg(0))
	}
	known := false
	for _, b := range demoBackends {
		known = known || b == c.backend
	}
	if !known {
		return nil, usagef("demo", "--backend %q: the demo drives %s", c.backend, strings.Join(demoBackends, " or "))
	}
	return c, nil
}

func (c *demoCmd) exec(ctx context.Context, s *streams) error {
	policy := answerAsk
	if c.yes {
		policy = answerAllow
	}
	return playScripted(ctx, s, scriptedPlay{cmd: "demo", cfg: c.cfg, json: c.json, keep: c.keep, backend: c.backend,
		policy: policy, brief: demoBrief, guides: []string{demoGuide}, scenario: demoScenario, tags: []string{"demo"}})
}

// scriptedPlay is one session of a real agent against the scripted model
// in a throwaway git repository: what demo and try share.
type scriptedPlay struct {
	cmd      string
	cfg      configFlags
	json     bool
	keep     bool
	backend  string // one of demoBackends
	policy   answerPolicy
	brief    string
	guides   []string
	scenario func(backend, repo string) *modelmock.Scenario
	tags     []string
	// unavailable builds the error for a backend whose probe failed; nil
	// is a plain error with the probe's reason.
	unavailable func(backend string, avail messages.Availability) error
}

// playScripted starts the scripted model on loopback, fills a temporary
// git repository, drives p's session in an embedded runtime, prints the
// turns, the per-turn diffs and where the record lives, and removes the
// temporary directories unless p.keep.
func playScripted(ctx context.Context, s *streams, p scriptedPlay) (err error) {
	cmd := p.cmd
	out := newPrinter(p.json, s.stdout, s.stderr, "")
	var temps []string
	defer func() {
		if p.keep {
			for _, d := range temps {
				out.note("kept %s", d)
			}
			return
		}
		for _, d := range temps {
			if rerr := os.RemoveAll(d); rerr != nil {
				out.note("warning: could not remove %s: %v", d, rerr)
			}
		}
		if len(temps) > 0 {
			out.note("removed the temporary directories (run with --keep to inspect them)")
		}
	}()
	mkTemp := func(pattern string) (string, error) {
		d, err := os.MkdirTemp("", pattern)
		if err != nil {
			return "", err
		}
		temps = append(temps, d)
		return filepath.EvalSymlinks(d)
	}

	cf := p.cfg
	if cf.home == "" {
		home, err := mkTemp("codesession-" + cmd + "-home-")
		if err != nil {
			return err
		}
		cf.home = home
	}
	cfg, err := cf.load(cmd, s.getenv)
	if err != nil {
		return err
	}
	log := cf.cliLogger(cfg, s.stderr)
	repo, err := mkTemp("codesession-" + cmd + "-repo-")
	if err != nil {
		return err
	}

	// The scripted model, on loopback, for as long as the session runs.
	mctx, stopMock := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMock()
	mock, err := modelmock.Start(mctx, p.scenario(p.backend, repo))
	if err != nil {
		return fmt.Errorf("start the scripted model server: %w", err)
	}
	defer mock.Close()

	// Only the scripted model's endpoint and a placeholder key reach the
	// backend, whatever the config or the machine holds.
	target, ok := scriptedTargets[p.backend]
	if !ok {
		return usagef(cmd, "--backend %q: no scripted run for it", p.backend)
	}
	cfg.Env = target.env(mock.URL())
	var agentHome string
	if target.cli {
		home, err := mkTemp("codesession-" + cmd + "-agent-home-")
		if err != nil {
			return err
		}
		cfg.Env["HOME"] = home // never the user's own ~/.claude, ~/.gemini...
		agentHome = home
		if target.prepare != nil {
			if err := target.prepare(home, mock.URL()); err != nil {
				return fmt.Errorf("point %s at the scripted model: %w", p.backend, err)
			}
		}
	}
	// the executable the command's environment names (as a test gives it),
	// else the transport's own lookup
	var bin string
	if target.envVar != "" {
		bin = s.getenv(target.envVar)
	}
	backends := transports.NewRegistry(target.transport(bin, agentHome))
	t, _ := backends.Get(p.backend)
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	avail := t.Probe(pctx)
	cancel()
	if !avail.Available {
		if p.unavailable != nil {
			return p.unavailable(p.backend, avail)
		}
		return fmt.Errorf("backend %s is not available here: %s", p.backend, orDash(avail.Reason))
	}

	what := "the in-process agent loop (read, edit, write, bash behind the tool gate)"
	if p.backend != native.ID {
		what = fmt.Sprintf("the real %s CLI (%s)", p.backend, orDash(avail.Version))
	}
	out.note("codesession %s: %s, against a SCRIPTED model server on %s.", cmd, what, mock.URL())
	out.note("The model's answers are a fixed script; the agent, its tools, the permission gate, the per-turn diff and the record are real. No network, no API key.")
	if note := initDemoRepo(ctx, repo); note != "" {
		out.note("note: %s", note)
	}
	out.note("repository: %s", repo)
	out.note("home:       %s", cfg.Home)

	rt, err := actors.New(cfg, actors.WithBackends(backends), actors.WithLogger(log))
	if err != nil {
		return fmt.Errorf("start the runtime: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			closeRuntime(ctx, s, rt)
		}
	}()
	if p.policy == answerAllow {
		out.note("every permission question is allowed once, without asking")
	}
	op := messages.Start{Brief: p.brief, Backend: p.backend, Cwd: repo, Model: target.model,
		InitialPosture: messages.PostureDefault, MaxPosture: messages.PostureAcceptEdits, TaskTags: p.tags}
	sid, err := runSession(ctx, s, rt, cmd, op, sessionOpts{json: p.json, policy: p.policy,
		guides: p.guides, readTimeout: 3 * time.Minute})
	if sid == "" {
		return err
	}

	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	evs, rerr := rt.Store().ReadEvents(rctx, sid, 0, 0)
	if rerr != nil {
		out.note("warning: cannot read the session's events back: %v", rerr)
	}
	// The per-turn diffs, as the record holds them.
	for _, pe := range evs {
		if pe.Event.Type != messages.EvTurnDiff || pe.Event.Diff == nil {
			continue
		}
		d := pe.Event.Diff
		out.note("== diff of turn %d (%s): %s", pe.Turn, d.Source, oneLine(d.Summary, 200))
		if u := strings.TrimRight(d.UnifiedDiff, "\n"); u != "" {
			out.note("%s", u)
		}
	}
	if files := listFiles(repo); len(files) > 0 {
		out.note("the repository now holds: %s", strings.Join(files, ", "))
	}
	// Where the session's record and events live, read back from the store.
	priced := "as the CLI reports it for the scripted model"
	if p.backend == native.ID {
		priced = "at made-up prices for the scripted model"
	}
	if rec, gerr := rt.Store().GetMeta(rctx, sid); gerr == nil {
		out.note("record:     %s (status %s, outcome %s, %d rounds, cost $%.4f %s)",
			filestore.MetaPath(cfg.Home, sid), rec.Status, orDash(string(rec.Outcome)), rec.RoundsElapsed, rec.CostUSD, priced)
	} else {
		out.note("warning: cannot read the session's record back: %v", gerr)
	}
	if rerr == nil {
		out.note("events:     %s (%d events)", filestore.EventsPath(cfg.Home, sid), len(evs))
	}
	out.note("model:      the scripted server answered %d model calls", len(mock.MainRequests()))
	closeRuntime(ctx, s, rt)
	closed = true
	return err
}

// demoTools names the tools and their path argument in the dialect of the
// backend the scripted model talks to.
type demoTools struct {
	read, edit, write, pathKey string
	path                       func(rel string) string
}

func demoToolsFor(backend, repo string) demoTools {
	if backend == native.ID {
		return demoTools{read: native.ToolRead, edit: native.ToolEdit, write: native.ToolWrite, pathKey: "path",
			path: func(rel string) string { return rel }}
	}
	return demoTools{read: "Read", edit: "Edit", write: "Write", pathKey: "file_path",
		path: func(rel string) string { return filepath.Join(repo, rel) }}
}

func demoInput(v map[string]any) json.RawMessage {
	b, _ := json.Marshal(v) // a map of strings always marshals
	return b
}

// demoScenario is the scripted model of the demo. Turn 1 (the brief):
// read hello.go, fix the typo with an edit (a permission question in the
// default posture), report. Turn 2 (the guidance): write hello_test.go
// (another question), report. A denied call is acknowledged, not papered
// over.
func demoScenario(backend, repo string) *modelmock.Scenario {
	tl := demoToolsFor(backend, repo)
	return &modelmock.Scenario{
		Rules: []modelmock.Rule{
			{Match: modelmock.Match{ToolResultRegex: `(?i)denied|not allowed|rejected|refused`}, Steps: []modelmock.Step{
				{Text: "Understood: that change was not allowed, so I left the files as they were. ({{result}})"}}},
			{Match: modelmock.Match{Text: demoBriefKey}, Steps: []modelmock.Step{
				{Thinking: "The typo is in hello.go; read it before editing.", Text: "Let me read hello.go first.",
					Tool: &modelmock.ToolCall{Name: tl.read, Input: demoInput(map[string]any{tl.pathKey: tl.path("hello.go")})}},
				{Text: "Found it: \"helo\" in greeting(). Fixing it.",
					Tool: &modelmock.ToolCall{Name: tl.edit, Input: demoInput(map[string]any{tl.pathKey: tl.path("hello.go"),
						"old_string": `"helo, world"`, "new_string": `"hello, world"`})}},
				{Text: "Fixed the typo: greeting() in hello.go now returns \"hello, world\"."},
			}},
			{Match: modelmock.Match{Text: demoGuideKey}, Steps: []modelmock.Step{
				{Text: "Adding a test for greeting().",
					Tool: &modelmock.ToolCall{Name: tl.write, Input: demoInput(map[string]any{tl.pathKey: tl.path("hello_test.go"), "content": demoTest})}},
				{Text: "Added hello_test.go: TestGreeting checks that greeting() returns \"hello, world\"."},
			}},
		},
		Default:           &modelmock.Step{Text: "(scripted model) I have nothing scripted for that."},
		ToolResultDefault: &modelmock.Step{Text: "(scripted model) Done."},
	}
}

// initDemoRepo fills dir with the demo's module and makes it a git
// repository with one commit. Without git, or when git fails, dir stays a
// plain directory and the returned note says so.
func initDemoRepo(ctx context.Context, dir string) string {
	for name, content := range map[string]string{"go.mod": "module demo\n\ngo 1.22\n", "hello.go": demoHelloBefore} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return fmt.Sprintf("could not write %s: %v", name, err)
		}
	}
	gitBin, err := exec.LookPath("git")
	if err != nil {
		return "git is not installed: the demo runs in a plain directory (diffs come from the tool events)"
	}
	steps := []struct {
		name string
		args []string
	}{
		{"init", []string{"init", "-q"}},
		{"add", []string{"add", "-A"}},
		{"commit", []string{"-c", "user.name=codesession demo", "-c", "user.email=demo@codesession.invalid",
			"-c", "commit.gpgsign=false", "commit", "-q", "-m", "initial commit"}},
	}
	for _, st := range steps {
		gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cmd := exec.CommandContext(gctx, gitBin, st.args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
		outb, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			msg := err.Error()
			var ee *exec.ExitError
			if errors.As(err, &ee) && len(outb) > 0 {
				msg = oneLine(string(outb), 200)
			}
			return fmt.Sprintf("git %s failed (%s): the demo directory has no initial commit", st.name, msg)
		}
	}
	return ""
}

// listFiles lists the regular files under dir, relative and sorted, outside .git.
func listFiles(dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			if rel, rerr := filepath.Rel(dir, path); rerr == nil {
				out = append(out, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	return out
}
