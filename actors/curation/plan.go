package curation

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/codesession/codesession/transports"
)

// ProvisionDir is the session's provisioning directory, beside its record:
// <home>/sessions/<id>/provision. Nothing is written into the repository.
func ProvisionDir(home, sessionID string) string {
	return filepath.Join(home, "sessions", sessionID, "provision")
}

// How each backend takes a plan: MCP servers in a config file of its own
// (claude-code's --mcp-config, codex's config.toml), in its protocol (ACP
// session/new), or not at all; skills as a claude-code plugin or as files
// the instructions point at.
type backendWay struct {
	mcpConfig  string // "claude" | "codex" | "droid" | "" (none)
	mcpSpec    bool   // MCP servers ride in the plan's MCPServers
	remoteMCP  bool   // takes vendor-hosted servers
	skillsAsPI bool   // claude-code plugin dir
	// home, when set, is a per-session HOME under the plan's dir the
	// backend runs with (Provision.Home): droid reads its MCP servers
	// from $HOME/.factory/mcp.json and its personal skills from
	// $HOME/.factory/skills/<name>/SKILL.md, and has no flag for either.
	home string
	// skillsIn, when set, is where the backend finds skills natively
	// (relative to the plan's dir): no instruction points at them.
	skillsIn string
}

// Skills go where each CLI finds them natively: claude-code's plugin dir,
// codex's $CODEX_HOME/skills (the session's own CODEX_HOME), droid's
// $HOME/.factory/skills (a per-session HOME), opencode's and kilo's
// skills.paths (in the session's own config content, OPENCODE_/
// KILO_CONFIG_CONTENT). ACP's session/new has no skills field, so each
// of these is the CLI's own. copilot, gemini and qwen get them as files the
// instructions point at: their native skill folders are the repository's
// (never written to) and their config home's (~/.copilot/skills or
// $COPILOT_HOME/skills, $GEMINI_CLI_HOME/.gemini/skills, $QWEN_HOME/skills),
// and pointing that home at the session would need the user's login and
// settings overlaid into it as droid's HOME is, which is not done yet.
// copilot 1.0.102's --add-dir does not load the added directory's
// .github/skills under --acp (tried live: the skill was not in the model
// request), and `copilot skill add` writes the user's own config.
var backendWays = map[string]backendWay{
	"claude-code": {mcpConfig: "claude", mcpSpec: true, remoteMCP: true, skillsAsPI: true},
	"codex":       {mcpConfig: "codex", mcpSpec: true, remoteMCP: true, skillsIn: "codex/skills"}, // $CODEX_HOME/skills, linked by the transport
	"droid":       {mcpConfig: "droid", mcpSpec: true, remoteMCP: true, home: droidHome, skillsIn: droidHome + "/.factory/skills"},
	"opencode":    {mcpSpec: true, remoteMCP: true, skillsIn: "opencode/skills"},
	"kilo":        {mcpSpec: true, remoteMCP: true, skillsIn: "kilo/skills"},
	"gemini":      {mcpSpec: true, remoteMCP: true},
	"copilot":     {mcpSpec: true, remoteMCP: true},
	"qwen":        {mcpSpec: true, remoteMCP: true}, // 0.24.4's initialize: mcpCapabilities {http, sse}
	"native":      {mcpSpec: true},                  // stdio servers as extra tools
}

// NativeSkills says whether backend takes provisioned skills natively (in
// a place its session's own config names); else they are files its
// instructions point at.
func NativeSkills(backend string) bool {
	w := backendWays[backend]
	return w.skillsIn != "" || w.skillsAsPI
}

// droidHome is droid's per-session HOME, relative to the plan's dir.
const droidHome = "droid-home"

// Chosen is one gated entry going into a plan, with its specs for the
// backend and its fetched skill files, if any.
type Chosen struct {
	Entry Entry
	Spec  BackendSpec
	Skill []SkillFile
}

// BuildPlan lays out a backend's plan for the chosen entries under dir and
// returns it, with the entries the backend cannot take (and why). It
// writes only under dir, files 0600.
func BuildPlan(backend, dir string, chosen []Chosen) (*transports.Provision, map[string]string, error) {
	way := backendWays[backend]
	plan := &transports.Provision{Dir: dir}
	ignored := map[string]string{}
	var instructions []string
	var skills []Chosen
	for _, c := range chosen {
		took := false
		if m := c.Spec.MCP; m != nil {
			switch {
			case !way.mcpSpec:
				ignored[c.Entry.ID] = backend + " takes no MCP servers from codesession"
				continue
			case m.URL != "" && !way.remoteMCP:
				ignored[c.Entry.ID] = backend + " takes no vendor-hosted MCP servers"
				continue
			}
			srv := transports.MCPServer{Name: m.Name, Command: m.Command, Args: append([]string(nil), m.Args...), URL: m.URL, AuthEnv: m.AuthEnv}
			plan.MCPServers = append(plan.MCPServers, srv)
			if m.AuthEnv != "" {
				plan.PassEnv = append(plan.PassEnv, m.AuthEnv)
			}
			took = true
		}
		if c.Spec.Skill != nil && len(c.Skill) > 0 {
			skills = append(skills, c)
			took = true
		}
		if c.Spec.Instructions != "" {
			instructions = append(instructions, c.Spec.Instructions)
			took = true
		}
		if !took {
			ignored[c.Entry.ID] = "nothing of it applies to " + backend
		}
	}
	if len(plan.MCPServers) == 0 && len(skills) == 0 && len(instructions) == 0 {
		return plan, ignored, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	write := func(rel string, data []byte) error {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			return err
		}
		plan.Files = append(plan.Files, rel)
		return nil
	}
	if len(skills) > 0 {
		base := "skills"
		switch {
		case way.skillsIn != "":
			base = way.skillsIn
			plan.SkillsDir = filepath.Join(dir, filepath.FromSlash(way.skillsIn))
		case way.skillsAsPI:
			base = "claude-plugin/skills"
			manifest, _ := json.MarshalIndent(map[string]any{"name": "codesession-provision", "version": "1.0.0",
				"description": "skills codesession provisioned for this session"}, "", "  ")
			if err := write("claude-plugin/.claude-plugin/plugin.json", manifest); err != nil {
				return nil, nil, err
			}
			plan.SkillsDir = filepath.Join(dir, "claude-plugin")
		default:
			plan.SkillsDir = filepath.Join(dir, "skills")
		}
		var names []string
		for _, c := range skills {
			for _, f := range c.Skill {
				if err := write(base+"/"+c.Spec.Skill.Name+"/"+f.Path, f.Data); err != nil {
					return nil, nil, err
				}
			}
			names = append(names, c.Spec.Skill.Name)
		}
		if !way.skillsAsPI && way.skillsIn == "" {
			instructions = append(instructions, fmt.Sprintf("Skills for this project are in %s (one directory each: %s). Read a skill's SKILL.md before a task it covers.",
				plan.SkillsDir, strings.Join(names, ", ")))
		}
	}
	switch way.mcpConfig {
	case "claude":
		if len(plan.MCPServers) > 0 {
			if err := write("claude/mcp.json", claudeMCPConfig(plan.MCPServers)); err != nil {
				return nil, nil, err
			}
			plan.ConfigFile = filepath.Join(dir, "claude", "mcp.json")
		}
	case "codex":
		if len(plan.MCPServers) > 0 {
			if err := write("codex/mcp_servers.toml", []byte(codexMCPServers(plan.MCPServers))); err != nil {
				return nil, nil, err
			}
			plan.ConfigFile = filepath.Join(dir, "codex", "mcp_servers.toml")
		}
	case "droid":
		// droid's mcp.json has claude-code's shape (as `droid mcp add`
		// writes it)
		if len(plan.MCPServers) > 0 {
			if err := write(droidHome+"/.factory/mcp.json", claudeMCPConfig(plan.MCPServers)); err != nil {
				return nil, nil, err
			}
			plan.ConfigFile = filepath.Join(dir, droidHome, ".factory", "mcp.json")
		}
	}
	if way.home != "" && (plan.ConfigFile != "" || plan.SkillsDir != "") {
		plan.Home = filepath.Join(dir, way.home)
	}
	if len(instructions) > 0 {
		plan.Instructions = "Capabilities codesession provisioned for this project:\n- " + strings.Join(instructions, "\n- ")
		if err := write("instructions.md", []byte(plan.Instructions+"\n")); err != nil {
			return nil, nil, err
		}
	}
	sort.Strings(plan.Files)
	return plan, ignored, nil
}

// claudeMCPConfig is claude-code's --mcp-config file. A token is never in
// it: Claude Code expands ${VAR} from its environment, which gets the
// variable by name (Provision.PassEnv).
func claudeMCPConfig(servers []transports.MCPServer) []byte {
	m := map[string]any{}
	for _, s := range servers {
		if s.Remote() {
			srv := map[string]any{"type": "http", "url": s.URL}
			if s.AuthEnv != "" {
				srv["headers"] = map[string]string{"Authorization": "Bearer ${" + s.AuthEnv + "}"}
			}
			m[s.Name] = srv
			continue
		}
		args := s.Args
		if args == nil {
			args = []string{} // null is not a list to Claude Code
		}
		srv := map[string]any{"type": "stdio", "command": s.Command, "args": args}
		if len(s.Env) > 0 {
			env := map[string]string{}
			for _, kv := range s.Env {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			srv["env"] = env
		}
		m[s.Name] = srv
	}
	b, _ := json.MarshalIndent(map[string]any{"mcpServers": m}, "", "  ")
	return b
}

// codexMCPServers is the [mcp_servers.*] part of codex's config.toml; the
// transport appends it to the session's config. A remote server's token
// is named (bearer_token_env_var), never written.
func codexMCPServers(servers []transports.MCPServer) string {
	var b strings.Builder
	q := strconv.Quote
	for _, s := range servers {
		fmt.Fprintf(&b, "\n[mcp_servers.%s]\n", q(s.Name))
		if s.Remote() {
			fmt.Fprintf(&b, "url = %s\n", q(s.URL))
			if s.AuthEnv != "" {
				fmt.Fprintf(&b, "bearer_token_env_var = %s\n", q(s.AuthEnv))
			}
			continue
		}
		fmt.Fprintf(&b, "command = %s\n", q(s.Command))
		args := make([]string, len(s.Args))
		for i, a := range s.Args {
			args[i] = q(a)
		}
		fmt.Fprintf(&b, "args = [%s]\n", strings.Join(args, ", "))
		if s.AuthEnv != "" {
			// codex starts a stdio server with a clean environment: the
			// token's variable is forwarded by name
			fmt.Fprintf(&b, "env_vars = [%s]\n", q(s.AuthEnv))
		}
		if len(s.Env) > 0 {
			fmt.Fprintf(&b, "[mcp_servers.%s.env]\n", q(s.Name))
			for _, kv := range s.Env {
				k, v, _ := strings.Cut(kv, "=")
				fmt.Fprintf(&b, "%s = %s\n", q(k), q(v))
			}
		}
	}
	return b.String()
}

// Cleanup removes what a plan provisioned under dir, keeping the launch
// manifest (it says what the session ran from, for later). A missing dir
// is nothing to do.
func Cleanup(dir string) error {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var first error
	for _, e := range ents {
		if e.Name() == ManifestFile {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil && first == nil {
			first = err
		}
	}
	return first
}
