package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/claudecode"
	"github.com/codesession/codesession/transports/codex"
	"github.com/codesession/codesession/transports/copilot"
	"github.com/codesession/codesession/transports/droid"
	"github.com/codesession/codesession/transports/gemini"
	"github.com/codesession/codesession/transports/kilo"
	"github.com/codesession/codesession/transports/modelmock"
	"github.com/codesession/codesession/transports/native"
	"github.com/codesession/codesession/transports/opencode"
	"github.com/codesession/codesession/transports/qwen"
)

// try's brief and what its scripted model writes: one short turn that
// creates one file, so the diff has something to show.
const (
	tryBrief    = "Create hello.txt saying hello, then tell me what you did."
	tryBriefKey = "Create hello.txt"
	tryFile     = "hello.txt"
	tryContent  = "hello from codesession try\n"
)

// scriptedTarget is how one backend is driven against the scripted model
// server: its transport, where its CLI comes from, the model to ask for,
// the environment that points it at the server, and its own tool that
// writes a file.
type scriptedTarget struct {
	// transport builds the backend; bin is the executable the command's
	// environment names in envVar ("" lets the transport look it up), and
	// home the scratch HOME of a CLI, removed with the rest.
	transport func(bin, home string) transports.Transport
	// prepare, when set, writes what the CLI reads from its HOME to find
	// the scripted model (droid's settings).
	prepare func(home, mockURL string) error
	// envVar names the executable and install installs the pinned CLI,
	// for the error when it is missing ("" for the in-process loop).
	envVar, install string
	// cli: an agent CLI, given a scratch HOME (never the user's own).
	cli   bool
	model string
	env   func(mockURL string) map[string]string
	// write is the agent's tool call that writes content to path (an
	// absolute path in repo).
	write func(repo, rel, content string) modelmock.ToolCall
}

// anthropicEnv points native and claude-code at the scripted model's
// Anthropic Messages endpoint with a placeholder key.
func anthropicEnv(url string) map[string]string {
	return map[string]string{
		native.EnvProvider:         native.ProviderAnthropic,
		native.EnvAnthropicBaseURL: url,
		native.EnvAnthropicAPIKey:  "demo-key-not-a-secret",
		native.EnvPrices:           `{"` + demoModel + `": {"input": 3, "output": 15}}`,
	}
}

func mockToolCall(name string, input map[string]any) modelmock.ToolCall {
	return modelmock.ToolCall{Name: name, Input: demoInput(input)}
}

// scriptedTargets are the backends demo and try drive against the scripted
// model: the in-process loop, and the agent CLIs whose wire the server
// speaks with no vendor account (each as its live tests configure it).
var scriptedTargets = map[string]scriptedTarget{
	native.ID: {
		transport: func(string, string) transports.Transport { return native.New(native.WithProcessEnv(nil)) },
		model:     demoModel, env: anthropicEnv,
		write: func(_, rel, content string) modelmock.ToolCall {
			return mockToolCall(native.ToolWrite, map[string]any{"path": rel, "content": content})
		},
	},
	claudecode.ID: {
		transport: func(bin, _ string) transports.Transport {
			if bin == "" {
				return claudecode.New()
			}
			return claudecode.New(claudecode.WithBinary(bin))
		},
		envVar: claudecode.EnvBinary, install: "npm install @anthropic-ai/claude-code@" + claudecode.PinnedVersion,
		cli: true, model: demoModel, env: anthropicEnv,
		write: func(repo, rel, content string) modelmock.ToolCall {
			return mockToolCall("Write", map[string]any{"file_path": filepath.Join(repo, rel), "content": content})
		},
	},
	codex.ID: {
		transport: func(bin, home string) transports.Transport {
			opts := []codex.Option{codex.WithHomeRoot(filepath.Join(home, "codex-homes"))} // removed with the scratch HOME
			if bin != "" {
				opts = append(opts, codex.WithBinary(bin))
			}
			return codex.New(opts...)
		},
		envVar: codex.EnvBinary, install: "npm install @openai/codex@" + codex.PinnedVersion,
		cli: true, model: "gpt-5.5", // a known slug: codex offers apply_patch only to models it knows
		env: func(url string) map[string]string {
			return map[string]string{"OPENAI_BASE_URL": url + "/v1", "OPENAI_API_KEY": "sk-mock"}
		},
		write: func(_, rel, content string) modelmock.ToolCall {
			var patch strings.Builder
			patch.WriteString("*** Begin Patch\n*** Add File: " + rel + "\n")
			for _, line := range strings.SplitAfter(strings.TrimSuffix(content, "\n"), "\n") {
				patch.WriteString("+" + strings.TrimSuffix(line, "\n") + "\n")
			}
			patch.WriteString("*** End Patch\n")
			return mockToolCall("apply_patch", map[string]any{"input": patch.String()})
		},
	},
	droid.ID: {
		transport: func(bin, _ string) transports.Transport {
			if bin == "" {
				return droid.New()
			}
			return droid.New(droid.WithBinary(bin))
		},
		envVar: droid.EnvBinary, install: "npm install droid@" + droid.PinnedVersion,
		cli: true, model: "custom:Scripted-model-0", // droid's id for the one custom model below
		env:     func(string) map[string]string { return map[string]string{} },
		prepare: writeDroidSettings,
		write: func(repo, rel, content string) modelmock.ToolCall {
			return mockToolCall("Create", map[string]any{"file_path": filepath.Join(repo, rel), "content": content})
		},
	},
	opencode.ID: acpTarget(opencode.Agent(), opencode.New, "mock/mock-model", func(url string) map[string]string {
		return map[string]string{opencode.EnvConfig: `{"provider":{"mock":{"npm":"@ai-sdk/openai-compatible","name":"Scripted model",` +
			`"options":{"baseURL":"` + url + `/v1","apiKey":"sk-mock"},` +
			`"models":{"mock-model":{"name":"Scripted model","tool_call":true,"limit":{"context":128000,"output":8192}}}}}}`}
	}, func(repo, rel, content string) modelmock.ToolCall {
		return mockToolCall("write", map[string]any{"filePath": filepath.Join(repo, rel), "content": content})
	}),
	kilo.ID: acpTarget(kilo.Agent(), kilo.New, "mock/mock-model", func(url string) map[string]string {
		return map[string]string{kilo.EnvConfig: `{"provider":{"mock":{"npm":"@ai-sdk/openai-compatible","name":"Scripted model",` +
			`"options":{"baseURL":"` + url + `/v1","apiKey":"sk-mock"},` +
			`"models":{"mock-model":{"name":"Scripted model","tool_call":true,"limit":{"context":128000,"output":8192}}}}}}`}
	}, func(repo, rel, content string) modelmock.ToolCall {
		return mockToolCall("write", map[string]any{"filePath": filepath.Join(repo, rel), "content": content})
	}),
	qwen.ID: acpTarget(qwen.Agent(), qwen.New, "mock-model", func(url string) map[string]string {
		return map[string]string{"OPENAI_BASE_URL": url + "/v1", "OPENAI_API_KEY": "sk-mock"}
	}, func(repo, rel, content string) modelmock.ToolCall {
		return mockToolCall("write_file", map[string]any{"file_path": filepath.Join(repo, rel), "content": content})
	}),
	copilot.ID: acpTarget(copilot.Agent(), copilot.New, "", func(url string) map[string]string {
		return map[string]string{"COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_BASE_URL": url + "/v1",
			"COPILOT_PROVIDER_API_KEY": "sk-mock", "COPILOT_MODEL": "mock-model"}
	}, func(repo, rel, content string) modelmock.ToolCall {
		return mockToolCall("create", map[string]any{"path": filepath.Join(repo, rel), "file_text": content})
	}),
	gemini.ID: acpTarget(gemini.Agent(), gemini.New, "gemini-2.5-pro", func(url string) map[string]string {
		return map[string]string{"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": "mock-key"}
	}, func(repo, rel, content string) modelmock.ToolCall {
		return mockToolCall("write_file", map[string]any{"file_path": filepath.Join(repo, rel), "content": content})
	}),
}

// acpTarget is an ACP agent's scriptedTarget.
func acpTarget(agent acp.Agent, build func(...acp.Option) *acp.Transport, model string,
	env func(string) map[string]string, write func(repo, rel, content string) modelmock.ToolCall) scriptedTarget {
	return scriptedTarget{
		transport: func(bin, _ string) transports.Transport {
			if bin == "" {
				return build()
			}
			return build(acp.WithBinary(bin))
		},
		envVar: agent.EnvBinary, install: agent.Install, cli: true, model: model, env: env, write: write,
	}
}

// writeDroidSettings points droid at the scripted model: one
// bring-your-own-key Chat Completions model in its HOME, no Factory login.
func writeDroidSettings(home, mockURL string) error {
	b, err := json.Marshal(map[string]any{"customModels": []map[string]any{{
		"model": "mock-model", "displayName": "Scripted model", "baseUrl": mockURL + "/v1",
		"apiKey": "sk-mock", "provider": "generic-chat-completion-api", "maxOutputTokens": 8192}}})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(home, ".factory"), 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(home, ".factory", "settings.json"), b, 0o600)
}

// tryBackends lists what try drives, sorted.
func tryBackends() []string { return sortedKeys(scriptedTargets) }

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
	fs.StringVar(&c.backend, "backend", native.ID, "the agent: "+strings.Join(tryBackends(), ", ")+" (an installed CLI)")
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
		usage:   "try [--backend B] [--json] [--keep] [--home DIR]",
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
	if _, ok := scriptedTargets[c.backend]; ok {
		return c, nil
	}
	return nil, usagef("try", "--backend %q: try drives %s against the scripted model; "+
		"to drive another backend by hand against `codesession modelmock`, see docs/backends.md",
		c.backend, strings.Join(tryBackends(), ", "))
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
	if tg := scriptedTargets[backend]; tg.envVar != "" {
		e.Message += "; set " + tg.envVar + " to its executable, or install it: " + tg.install
	}
	return e
}

// tryScenario is try's scripted model: write hello.txt with the backend's
// own write tool, then say what was done.
func tryScenario(backend, repo string) *modelmock.Scenario {
	write := scriptedTargets[backend].write(repo, tryFile, tryContent)
	return &modelmock.Scenario{
		Rules: []modelmock.Rule{
			{Match: modelmock.Match{ToolResultRegex: `(?i)denied|not allowed|rejected|refused`}, Steps: []modelmock.Step{
				{Text: "That write was not allowed, so I changed nothing. ({{result}})"}}},
			{Match: modelmock.Match{Text: tryBriefKey}, Steps: []modelmock.Step{
				{Text: "Creating " + tryFile + ".",
					Tool: &write},
				{Text: "Created " + tryFile + " with one line of greeting."},
			}},
		},
		Default:           &modelmock.Step{Text: "(scripted model) I have nothing scripted for that."},
		ToolResultDefault: &modelmock.Step{Text: "(scripted model) Done."},
	}
}
