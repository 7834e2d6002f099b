package controlplane

import (
	"log/slog"

	"github.com/codesession/codesession/actors"
	"github.com/codesession/codesession/actors/mcpserver"
	"github.com/codesession/codesession/actors/optool"
	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
)

// MCPOptions configure the code_session tool the daemon serves at /mcp.
type MCPOptions struct {
	// Disable leaves /mcp out.
	Disable bool
	// Limits are the ceilings of every call through /mcp; an empty
	// MaxPosture is the config's defaultMaxPosture. A host cannot raise
	// them: they are the daemon's, like the scope its sessions run under.
	Limits messages.ScopeConstraints
	// Version is reported in the MCP handshake.
	Version string
}

// newMCPHandler builds the /mcp handler: the op tool's dispatcher over the
// daemon's runtime, under the daemon's scope, as streamable HTTP.
func newMCPHandler(rt *actors.Runtime, cfg config.Config, scope string, o MCPOptions, log *slog.Logger) (*mcpserver.HTTPHandler, error) {
	lim := o.Limits
	if lim.MaxPosture == "" {
		lim.MaxPosture = cfg.DefaultMaxPosture
	}
	if scope == "" {
		scope = DefaultScope
	}
	d, err := optool.New(optool.Options{Ops: rt, Scope: scope, Limits: lim,
		DefaultMaxPosture: cfg.DefaultMaxPosture, Watch: optool.StoreWatch(rt.Store())})
	if err != nil {
		return nil, err
	}
	srv, err := mcpserver.New(d, mcpserver.Options{Version: o.Version, Logger: log})
	if err != nil {
		return nil, err
	}
	return mcpserver.NewHTTPHandler(srv, log), nil
}
