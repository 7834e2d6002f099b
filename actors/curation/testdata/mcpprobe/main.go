// Command mcpprobe is a tiny stdio MCP server for the live curation test:
// one tool, magic_word, that answers a word the model cannot guess.
package main

import (
	"context"
	"encoding/json"
	"log"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpprobe", Version: "1.0.0"}, nil)
	srv.AddTool(&mcp.Tool{
		Name:        "magic_word",
		Description: "Returns the magic word of this project.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "xyzzy-provisioned"}}}, nil
	})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
