package acp

import (
	"path/filepath"
	"sort"
	"strings"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/gate"
)

// What the client decides about a session/request_permission before a
// human sees it: the workspace gate first (seed 002), then the posture.

// verdict is the client's decision on a permission request.
type verdict int

const (
	verdictInvalid verdict = iota
	// verdictAsk: raise a clarification.
	verdictAsk
	// verdictAllow: allow once without asking (the posture allows it).
	verdictAllow
	// verdictReject: reject without asking (the gate refused a path, or
	// the posture forbids the call).
	verdictReject
)

func (v verdict) String() string {
	switch v {
	case verdictAsk:
		return "ask"
	case verdictAllow:
		return "allow"
	case verdictReject:
		return "reject"
	}
	return "invalid"
}

// editKinds are the ACP tool kinds that change files: the descriptor's
// EditToolNames of every ACP backend, since events name a tool by kind.
var editKinds = []string{string(acpsdk.ToolKindEdit), string(acpsdk.ToolKindDelete), string(acpsdk.ToolKindMove)}

// EditToolNames is what every ACP backend's descriptor lists: the client
// names a tool call by its ACP kind, the one name all agents share.
func EditToolNames() []string { return append([]string(nil), editKinds...) }

func isEdit(kind string) bool {
	for _, k := range editKinds {
		if k == kind {
			return true
		}
	}
	return false
}

// readOnlyKinds run without asking in every posture once the gate passed
// their paths.
func readOnlyKind(kind string) bool {
	switch acpsdk.ToolKind(kind) {
	case acpsdk.ToolKindRead, acpsdk.ToolKindSearch, acpsdk.ToolKindThink:
		return true
	}
	return false
}

// decide is the policy: a gate refusal rejects; reads run; plan rejects
// anything else; acceptEdits allows edits; full allows everything; the
// rest asks. reason says why when it does not ask.
func decide(ws gate.Workspace, p messages.Posture, kind string, paths []string) (verdict, string) {
	for _, path := range paths {
		if _, err := ws.Resolve(path); err != nil {
			return verdictReject, "the workspace gate " + err.Error()
		}
	}
	switch {
	case readOnlyKind(kind):
		return verdictAllow, "a read inside the workspace"
	case p == messages.PosturePlan:
		return verdictReject, "the session is in plan posture: only reads run"
	case p == messages.PostureFull:
		return verdictAllow, "full posture"
	case p == messages.PostureAcceptEdits && isEdit(kind):
		return verdictAllow, "acceptEdits posture"
	}
	return verdictAsk, ""
}

// pathKeys are rawInput fields that name a file or directory, as the
// three agents spell them.
var pathKeys = map[string]bool{"path": true, "file_path": true, "filePath": true, "filepath": true,
	"absolute_path": true, "file": true, "dir_path": true, "directory": true, "cwd": true,
	"old_path": true, "new_path": true, "source": true, "destination": true, "target_file": true}

// toolPaths collects every path a tool call names: its locations, its
// diffs and the path fields of its raw input (one level deep into
// objects and lists), each once, sorted. Relative paths stay relative:
// the gate reads them against the workspace.
func toolPaths(locs []acpsdk.ToolCallLocation, content []acpsdk.ToolCallContent, raw any) []string {
	seen := map[string]bool{}
	add := func(p string) {
		if p = strings.TrimSpace(p); p != "" {
			seen[filepath.FromSlash(p)] = true
		}
	}
	for _, l := range locs {
		add(l.Path)
	}
	for _, c := range content {
		if c.Diff != nil {
			add(c.Diff.Path)
		}
	}
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		if depth > 3 {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			for k, val := range x {
				if s, ok := val.(string); ok && pathKeys[k] {
					add(s)
					continue
				}
				walk(val, depth+1)
			}
		case []any:
			for _, val := range x {
				walk(val, depth+1)
			}
		}
	}
	walk(raw, 0)
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// pickOption returns the option of the first kind in kinds the agent
// offers: options differ per agent by id (once, proceed_once, allow_once)
// but share their kind.
func pickOption(opts []acpsdk.PermissionOption, kinds ...acpsdk.PermissionOptionKind) (acpsdk.PermissionOptionId, bool) {
	for _, k := range kinds {
		for _, o := range opts {
			if o.Kind == k {
				return o.OptionId, true
			}
		}
	}
	return "", false
}

// outcomeFor maps a decision to the agent's option; cancel (or an agent
// that offers no fitting option) is the cancelled outcome.
func outcomeFor(opts []acpsdk.PermissionOption, d messages.Decision) acpsdk.RequestPermissionOutcome {
	var id acpsdk.PermissionOptionId
	ok := false
	switch d {
	case messages.DecisionAllowOnce:
		id, ok = pickOption(opts, acpsdk.PermissionOptionKindAllowOnce, acpsdk.PermissionOptionKindAllowAlways)
	case messages.DecisionAllowSession:
		id, ok = pickOption(opts, acpsdk.PermissionOptionKindAllowAlways, acpsdk.PermissionOptionKindAllowOnce)
	case messages.DecisionDeny:
		id, ok = pickOption(opts, acpsdk.PermissionOptionKindRejectOnce, acpsdk.PermissionOptionKindRejectAlways)
	}
	if !ok {
		return acpsdk.RequestPermissionOutcome{Cancelled: &acpsdk.RequestPermissionOutcomeCancelled{}}
	}
	return acpsdk.RequestPermissionOutcome{Selected: &acpsdk.RequestPermissionOutcomeSelected{OptionId: id}}
}
