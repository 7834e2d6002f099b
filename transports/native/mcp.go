package native

// The plan's MCP servers as extra tools (capability curation, seed 000
// §9): each stdio server of SessionSpec.Provision is started under the
// watchdog like bash, with bash's environment (the token a server needs is
// passed by name), and its tools are offered as mcp__<server>__<tool>.
// A call is gated like bash (an exec tool: it asks below full posture).
// A server that cannot start is a warning, never a failed start.

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/proc"
)

// mcpStartTimeout bounds starting one server and listing its tools.
const mcpStartTimeout = 30 * time.Second

// mcpCallTimeout bounds one tool call.
const mcpCallTimeout = 5 * time.Minute

// maxMCPTools bounds the tools one session takes from its servers.
const maxMCPTools = 64

type mcpRoute struct {
	conn *mcpConn
	tool string
}

type mcpConn struct {
	name string
	cs   *mcp.ClientSession
	cmd  *exec.Cmd
	h    *proc.Handle
}

// mcpTools are a session's MCP tools; nil has none.
type mcpTools struct {
	conns  []*mcpConn
	specs  []ToolSpec
	routes map[string]mcpRoute
	once   sync.Once
}

// openMCP starts the plan's stdio servers (remote ones are not taken by
// this backend: curation does not plan them for it) and lists their tools.
func openMCP(ctx context.Context, plan *transports.Provision, env *toolEnv) (*mcpTools, []string) {
	if plan == nil || len(plan.MCPServers) == 0 {
		return nil, nil
	}
	m := &mcpTools{routes: map[string]mcpRoute{}}
	var warnings []string
	for _, srv := range plan.MCPServers {
		if srv.Remote() {
			warnings = append(warnings, fmt.Sprintf("MCP server %s: the native backend takes local (stdio) servers only", srv.Name))
			continue
		}
		c, specs, err := startMCP(ctx, srv, env)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("MCP server %s not started: %v", srv.Name, err))
			continue
		}
		m.conns = append(m.conns, c)
		for _, sp := range specs {
			if len(m.specs) >= maxMCPTools {
				warnings = append(warnings, fmt.Sprintf("MCP server %s: more than %d tools; the rest are not offered", srv.Name, maxMCPTools))
				break
			}
			m.specs = append(m.specs, sp)
			m.routes[sp.Name] = mcpRoute{conn: c, tool: strings.TrimPrefix(sp.Name, "mcp__"+srv.Name+"__")}
		}
	}
	return m, warnings
}

func startMCP(ctx context.Context, srv transports.MCPServer, env *toolEnv) (*mcpConn, []ToolSpec, error) {
	ctx, cancel := context.WithTimeout(ctx, mcpStartTimeout)
	defer cancel()
	cmd := exec.Command(srv.Command, srv.Args...)
	cmd.Dir = env.ws.Real()
	cmd.Env = append(append([]string{}, env.env...), srv.Env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	h, err := env.procs.Start(cmd, proc.Options{Confine: env.confine})
	if err != nil {
		return nil, nil, err
	}
	c := &mcpConn{name: srv.Name, cmd: cmd, h: h}
	client := mcp.NewClient(&mcp.Implementation{Name: "codesession-native", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: stdin}, nil)
	if err != nil {
		c.close()
		return nil, nil, err
	}
	c.cs = cs
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		c.close()
		return nil, nil, err
	}
	var specs []ToolSpec
	for _, t := range res.Tools {
		schema := map[string]any{"type": "object"}
		if b, err := json.Marshal(t.InputSchema); err == nil {
			_ = json.Unmarshal(b, &schema)
		}
		specs = append(specs, ToolSpec{Name: "mcp__" + srv.Name + "__" + t.Name, Description: t.Description, Schema: schema})
	}
	return c, specs, nil
}

func (c *mcpConn) close() {
	if c.cs != nil {
		_ = c.cs.Close()
	}
	if c.h != nil {
		c.h.Kill(true)
	}
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	if c.h != nil {
		c.h.Release()
	}
}

// offered are the MCP tools the model is told about under posture: none
// in plan (they may change anything), none outside allowedTools.
func (m *mcpTools) offered(allowed []string, plan bool) []ToolSpec {
	if m == nil || plan {
		return nil
	}
	var out []ToolSpec
	for _, sp := range m.specs {
		if allowed == nil || containsString(allowed, sp.Name) {
			out = append(out, sp)
		}
	}
	return out
}

func (m *mcpTools) has(name string) bool {
	if m == nil {
		return false
	}
	_, ok := m.routes[name]
	return ok
}

// call runs one MCP tool call; its text content is the result.
func (m *mcpTools) call(ctx context.Context, name string, input json.RawMessage) toolResult {
	r := m.routes[name]
	ctx, cancel := context.WithTimeout(ctx, mcpCallTimeout)
	defer cancel()
	var args map[string]any
	if err := json.Unmarshal(input, &args); err != nil {
		return errResult("%s: the input is not a JSON object: %v", name, err)
	}
	res, err := r.conn.cs.CallTool(ctx, &mcp.CallToolParams{Name: r.tool, Arguments: args})
	if err != nil {
		return errResult("%s failed: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return toolResult{output: b.String(), isError: res.IsError}
}

func (m *mcpTools) close() {
	if m == nil {
		return
	}
	m.once.Do(func() {
		for _, c := range m.conns {
			c.close()
		}
	})
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
