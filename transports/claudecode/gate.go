package claudecode

import (
	"encoding/json"
	"path/filepath"

	"github.com/codesession/codesession/transports/gate"
)

// fileTools are Claude Code's tools that name files, and the input keys
// that hold their paths; a glob key holds a pattern whose literal prefix
// is a path.
var fileTools = map[string]struct{ paths, globs []string }{
	"Read":         {paths: []string{"file_path"}},
	"Write":        {paths: []string{"file_path"}},
	"Edit":         {paths: []string{"file_path"}},
	"MultiEdit":    {paths: []string{"file_path"}},
	"NotebookEdit": {paths: []string{"notebook_path"}},
	"NotebookRead": {paths: []string{"notebook_path"}},
	"LS":           {paths: []string{"path"}},
	"Glob":         {paths: []string{"path"}, globs: []string{"pattern"}},
	"Grep":         {paths: []string{"path"}},
}

// gateCheck runs a permission question's paths through the seed 002
// workspace gate: nil when every path resolves inside the workspace (or
// the tool names no file), else the *gate.Refusal the agent is told.
func gateCheck(ws gate.Workspace, tool string, input json.RawMessage) error {
	keys, ok := fileTools[tool]
	if !ok {
		return nil
	}
	var in map[string]any
	if json.Unmarshal(input, &in) != nil {
		return &gate.Refusal{Path: string(input), Reason: "the tool input is not a JSON object"}
	}
	for _, k := range keys.paths {
		v, present := in[k]
		if !present {
			continue
		}
		p, _ := v.(string)
		if _, err := ws.Resolve(p); err != nil {
			return err
		}
	}
	for _, k := range keys.globs {
		pat, _ := in[k].(string)
		if pat == "" {
			continue
		}
		base, _, err := ws.GlobBase(pat)
		if err != nil {
			return err
		}
		if !filepath.IsAbs(base) {
			if dir, _ := in["path"].(string); dir != "" {
				base = filepath.Join(dir, base)
			}
		}
		if _, err := ws.Resolve(base); err != nil {
			return err
		}
	}
	return nil
}
