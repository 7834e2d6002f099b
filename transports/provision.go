package transports

import (
	"os"
	"path/filepath"
)

// Provision is a session's provisioning plan: the capabilities capability
// curation (actors/curation) decided this session gets, already laid out
// as files under the session's provision directory. A transport only reads
// it — the flags, config entries and protocol fields each backend takes —
// and never decides what to provision. The plan is immutable once in a
// SessionSpec; a nil or empty plan provisions nothing.
type Provision struct {
	// Dir is <home>/sessions/<id>/provision; every path below is inside it.
	Dir string
	// MCPServers are the MCP servers of the plan, for the backends that
	// take them in their protocol (ACP session/new) or in process (native).
	MCPServers []MCPServer
	// Instructions is text to append to the agent's system prompt (T0
	// capabilities, and the pointer to the skills).
	Instructions string
	// ConfigFile is the backend's own config written for this session: the
	// --mcp-config file of claude-code, the mcp_servers TOML fragment of
	// codex, droid's mcp.json; "" when the backend needs none.
	ConfigFile string
	// SkillsDir holds the skills, one directory per skill with a SKILL.md;
	// for claude-code it is a plugin directory (--plugin-dir), the skills
	// under its skills/.
	SkillsDir string
	// Home, when set, is a per-session HOME the plan laid out (droid's:
	// .factory/mcp.json and .factory/skills): the backend runs with it as
	// HOME, the user's own entries of its dot-directory linked in
	// (OverlayHome).
	Home string
	// Files are every file the plan wrote, relative to Dir.
	Files []string
	// PassEnv names the daemon variables holding the tokens the servers
	// need: the backend's processes get them by name (never in a file).
	PassEnv []string
}

// WithProvision is the spec with its plan's instructions appended to the
// system prompt and its token variables passed by name: what every
// backend takes of a plan the same way.
func (s SessionSpec) WithProvision() SessionSpec {
	p := s.Provision
	if p == nil {
		return s
	}
	if p.Instructions != "" {
		if s.AppendSystemPrompt != "" {
			s.AppendSystemPrompt += "\n\n"
		}
		s.AppendSystemPrompt += p.Instructions
	}
	if len(p.PassEnv) > 0 {
		s.PassEnv = append(append([]string(nil), s.PassEnv...), p.PassEnv...)
	}
	return s
}

// Empty reports whether the plan provisions nothing.
func (p *Provision) Empty() bool {
	return p == nil || (len(p.MCPServers) == 0 && p.Instructions == "" && p.ConfigFile == "" && p.SkillsDir == "" && p.Home == "")
}

// MCPServer is one MCP server of a plan: a local command (stdio) or a
// vendor-hosted URL (streamable HTTP).
type MCPServer struct {
	Name    string
	Command string
	Args    []string
	// Env is KEY=VALUE for a stdio server's process.
	Env []string
	URL string
	// AuthEnv names the variable whose value is the server's token: a
	// bearer token for a remote server, in the environment of a local one.
	AuthEnv string
}

// Remote reports whether the server is reached over HTTP.
func (m MCPServer) Remote() bool { return m.URL != "" }

// OverlayHome links every entry of userHome/dot that the plan's
// home/dot does not have (droid's settings.json with its BYOK models, its
// login, its sessions directory) into home/dot, so a backend run with the
// plan's HOME keeps the user's own configuration and its sessions stay in
// the user's home (a resume after the plan is removed finds them). The
// sessions directory is made in userHome when missing, so it is linked
// too. It is idempotent.
func OverlayHome(home, userHome, dot string) error {
	dst := filepath.Join(home, dot)
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	if userHome == "" {
		return nil
	}
	src := filepath.Join(userHome, dot)
	if err := os.MkdirAll(filepath.Join(src, "sessions"), 0o700); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		to := filepath.Join(dst, e.Name())
		if _, err := os.Lstat(to); err == nil {
			continue // the plan's own (mcp.json, skills) or linked already
		}
		if err := os.Symlink(filepath.Join(src, e.Name()), to); err != nil {
			return err
		}
	}
	return nil
}
