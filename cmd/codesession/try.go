package main

import (
	"context"
	"strings"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/claudecode"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/native"
)

// try's brief and what its scripted model writes: one short turn that
// creates one file, so the diff has something to show.
const (
	tryBrief    = "Create hello.txt saying hello, then tell me what you did."
	tryBriefKey = "Create hello.txt"
	tryFile     = "hello.txt"
	tryContent  = "hello from codesession try\n"
)

// tryInstall says where a backend's CLI comes from, for the error when it
// is missing: the variable that names the executable, and the install
// command of the pinned version.
var tryInstall = map[string]struct{ envVar, install string }{
	claudecode.ID: {claudecode.EnvBinary, "npm install @anthropic-ai/claude-code@" + claudecode.PinnedVersion},
}

// tryCmd is a newcomer's first command: one short real session of the
// chosen agent against the scripted model on loopback, in a scratch git
// repository, printed turn by turn with its diff and verdict, then cleaned
// up. Unlike demo it never asks: every permission question is allowed.
type tryCmd struct {
	cfg     configFlags
	json    bool
	keep    bool
	backend string
}

func (c *tryCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("try")
	fs.StringVar(&c.backend, "backend", native.ID, "the agent: "+strings.Join(demoBackends, " or ")+" (an installed CLI)")
	fs.BoolVar(&c.json, "json", false, "print one JSON object per line, like run --json")
	fs.BoolVar(&c.keep, "keep", false, "keep the scratch repository and home instead of removing them")
	c.cfg.addHome(fs)
	c.cfg.addConfig(fs)
	c.cfg.addVerbose(fs)
	return fs
}

func tryCommand() command {
	return command{
		name:    "try",
		summary: "try a backend: one short real session against a scripted model on 127.0.0.1, in a scratch git repository",
		usage:   "try [--backend native|claude-code] [--json] [--keep] [--home DIR]",
		flags:   func() *pflag.FlagSet { return (&tryCmd{}).flagSet() },
		parse:   func(args []string) (runner, error) { return parseTryFlags(args) },
	}
}

func parseTryFlags(args []string) (*tryCmd, error) {
	c := &tryCmd{}
	fs := c.flagSet()
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef("try", "takes no arguments, got %q", fs.Arg(0))
	}
	for _, b := range demoBackends {
		if b == c.backend {
			return c, nil
		}
	}
	return nil, usagef("try", "--backend %q: try drives %s against the scripted model; "+
		"to drive another backend by hand against `codesession modelmock`, see docs/backends.md",
		c.backend, strings.Join(demoBackends, " or "))
}

func (c *tryCmd) exec(ctx context.Context, s *streams) error {
	return playScripted(ctx, s, scriptedPlay{cmd: "try", cfg: c.cfg, json: c.json, keep: c.keep, backend: c.backend,
		policy: answerAllow, brief: tryBrief, scenario: tryScenario, tags: []string{"try"}, unavailable: tryUnavailable})
}

// tryUnavailable is the typed error for a backend whose CLI is missing or
// broken: it names the variable to point at the executable and the
// install command, whatever the probe's own reason says.
func tryUnavailable(backend string, avail messages.Availability) error {
	e := &messages.Error{Code: messages.CodeUnavailable, Op: "try", Field: "backend",
		Message: backend + " is not available here: " + strings.TrimRight(orDash(avail.Reason), ": ")}
	if in, ok := tryInstall[backend]; ok {
		e.Message += "; set " + in.envVar + " to its executable, or install it: " + in.install
	}
	return e
}

// tryScenario is try's scripted model: write hello.txt with the backend's
// own write tool, then say what was done.
func tryScenario(backend, repo string) *modelmock.Scenario {
	tl := demoToolsFor(backend, repo)
	return &modelmock.Scenario{
		Rules: []modelmock.Rule{
			{Match: modelmock.Match{ToolResultRegex: `(?i)denied|not allowed|rejected|refused`}, Steps: []modelmock.Step{
				{Text: "That write was not allowed, so I changed nothing. ({{result}})"}}},
			{Match: modelmock.Match{Text: tryBriefKey}, Steps: []modelmock.Step{
				{Text: "Creating " + tryFile + ".",
					Tool: &modelmock.ToolCall{Name: tl.write, Input: demoInput(map[string]any{tl.pathKey: tl.path(tryFile), "content": tryContent})}},
				{Text: "Created " + tryFile + " with one line of greeting."},
			}},
		},
		Default:           &modelmock.Step{Text: "(scripted model) I have nothing scripted for that."},
		ToolResultDefault: &modelmock.Step{Text: "(scripted model) Done."},
	}
}
