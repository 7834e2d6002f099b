package acp

import (
	"os"
	"strings"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/codesession/codesession/transports"
)

// mcpServers are the plan's MCP servers as session/new (session/load)
// takes them: every agent takes stdio servers; vendor-hosted ones only
// when the agent says it takes HTTP servers. A remote server's token is
// read from the daemon's environment by name here and goes only into the
// protocol message, never into a file.
func mcpServers(p *transports.Provision, http bool) []acpsdk.McpServer {
	out := []acpsdk.McpServer{}
	if p == nil {
		return out
	}
	for _, m := range p.MCPServers {
		if m.Remote() {
			if !http {
				continue
			}
			h := []acpsdk.HttpHeader{}
			if m.AuthEnv != "" {
				if tok := os.Getenv(m.AuthEnv); tok != "" {
					h = append(h, acpsdk.HttpHeader{Name: "Authorization", Value: "Bearer " + tok})
				}
			}
			out = append(out, acpsdk.McpServer{Http: &acpsdk.McpServerHttpInline{Name: m.Name, Type: "http", Url: m.URL, Headers: h}})
			continue
		}
		env := []acpsdk.EnvVariable{}
		for _, kv := range m.Env {
			k, v, _ := strings.Cut(kv, "=")
			env = append(env, acpsdk.EnvVariable{Name: k, Value: v})
		}
		if m.AuthEnv != "" {
			if tok, ok := os.LookupEnv(m.AuthEnv); ok {
				env = append(env, acpsdk.EnvVariable{Name: m.AuthEnv, Value: tok})
			}
		}
		out = append(out, acpsdk.McpServer{Stdio: &acpsdk.McpServerStdio{Name: m.Name, Command: m.Command, Args: append([]string{}, m.Args...), Env: env}})
	}
	return out
}
