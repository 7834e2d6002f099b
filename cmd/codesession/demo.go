package main

import (
	"context"
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
	"github.com/codesession/codesession/transports/script"
)

// The demo's brief and its one follow-up guidance. The guidance contains
// "test", which is what the demo scenario's second turn matches.
const (
	demoBrief = "Add a small greet package with Greet(name) that falls back to \"world\", and a README line that shows how to call it."
	demoGuide = "Now add a table test for Greet that covers the empty name, and run the tests."
)

// demoCmd is the one-command main job for a fresh machine: a session of
// the scripted backend, in a temporary git repository, driven from start to
// verdict, with nothing to install and no credentials.
type demoCmd struct {
	cfg  configFlags
	json bool
	keep bool
}

func (c *demoCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("demo")
	fs.BoolVar(&c.json, "json", false, "print one JSON object per line, like run --json")
	fs.BoolVar(&c.keep, "keep", false, "keep the temporary repository and home instead of removing them")
	c.cfg.addHome(fs)
	c.cfg.addConfig(fs)
	return fs
}

func demoCommand() command {
	return command{
		name:    "demo",
		summary: "run a whole session against the scripted backend in a temporary git repository",
		usage:   "demo [--json] [--keep] [--home DIR]",
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
	return c, nil
}

func (c *demoCmd) exec(ctx context.Context, s *streams) (err error) {
	const cmd = "demo"
	out := newPrinter(c.json, s.stdout, s.stderr, "")
	var temps []string
	defer func() {
		if c.keep {
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

	cf := c.cfg
	if cf.home == "" {
		home, err := os.MkdirTemp("", "codesession-demo-home-")
		if err != nil {
			return err
		}
		temps = append(temps, home)
		cf.home = home
	}
	cfg, err := cf.load(cmd, s.getenv)
	if err != nil {
		return err
	}
	if installLogger != nil {
		installLogger(s.stderr, cfg.LogLevel)
	}
	// The demo always plays the demo scenario, whatever the config names.
	delete(cfg.Env, script.EnvScenario)

	repo, err := os.MkdirTemp("", "codesession-demo-repo-")
	if err != nil {
		return err
	}
	temps = append(temps, repo)
	if repo, err = filepath.EvalSymlinks(repo); err != nil {
		return err
	}

	out.note("codesession demo: backend %q is SCRIPTED: it replays a fixed scenario and never calls a model.", script.ID)
	out.note("It shows the whole loop: start, read each turn, answer permission questions, guide, stop with a verdict.")
	if note := initDemoRepo(ctx, repo); note != "" {
		out.note("note: %s", note)
	}
	out.note("repository: %s", repo)
	out.note("home:       %s", cfg.Home)

	backends := transports.NewRegistry(script.New(script.WithScenario(script.DemoScenario())))
	rt, err := actors.New(cfg, actors.WithBackends(backends))
	if err != nil {
		return fmt.Errorf("start the runtime: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			closeRuntime(ctx, s, rt)
		}
	}()
	op := messages.Start{Brief: demoBrief, Backend: script.ID, Cwd: repo,
		InitialPosture: messages.PostureDefault, MaxPosture: messages.PostureAcceptEdits, TaskTags: []string{"demo"}}
	sid, err := runSession(ctx, s, rt, cmd, op, sessionOpts{json: c.json, policy: answerAllow,
		guides: []string{demoGuide}, readTimeout: 2 * time.Minute})
	if sid == "" {
		return err
	}

	if files := listFiles(repo); len(files) > 0 {
		out.note("the repository now holds: %s", strings.Join(files, ", "))
	}
	// Where the session's record and events live, read back from the store.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	if rec, gerr := rt.Store().GetMeta(rctx, sid); gerr == nil {
		out.note("record:     %s (status %s, outcome %s, %d rounds)",
			filestore.MetaPath(cfg.Home, sid), rec.Status, orDash(string(rec.Outcome)), rec.RoundsElapsed)
	} else {
		out.note("warning: cannot read the session's record back: %v", gerr)
	}
	if evs, rerr := rt.Store().ReadEvents(rctx, sid, 0, 0); rerr == nil {
		out.note("events:     %s (%d events)", filestore.EventsPath(cfg.Home, sid), len(evs))
	} else {
		out.note("warning: cannot read the session's events back: %v", rerr)
	}
	closeRuntime(ctx, s, rt)
	closed = true
	return err
}

// initDemoRepo makes dir a git repository with one commit. Without git, or
// when git fails, dir stays a plain directory and the returned note says so.
func initDemoRepo(ctx context.Context, dir string) string {
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module demo\n\ngo 1.22\n"), 0o644); err != nil {
		return fmt.Sprintf("could not write go.mod: %v", err)
	}
	gitBin, err := exec.LookPath("git")
	if err != nil {
		return "git is not installed: the demo runs in a plain directory"
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
