package modelmock

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The official Anthropic Go SDK reads what the mock serves: a client
// that parses it strictly shows the wire is right.

func sdkClient(srv *Server, retries int) anthropic.Client {
	return anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(srv.URL()),
		option.WithAPIKey("sk-ant-test"), option.WithMaxRetries(retries))
}

func TestAnthropicSDKStreamsAToolTurn(t *testing.T) {
	sc := &Scenario{Rules: []Rule{{Match: Match{Text: "list the files"}, Steps: []Step{
		{Thinking: "ls is enough", Text: "Listing.", Chunks: 3, Tool: &ToolCall{Name: "Bash", Input: json.RawMessage(`{"command":"ls"}`)}},
		{Text: "There are {{result}}."},
	}}}}
	srv, err := Start(t, sc)
	require.NoError(t, err)
	client := sdkClient(srv, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := anthropic.MessageNewParams{Model: "claude-mock-1", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("list the files"))}}

	stream := client.Messages.NewStreaming(ctx, params)
	msg := anthropic.Message{}
	for stream.Next() {
		require.NoError(t, msg.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())
	assert.Equal(t, anthropic.StopReasonToolUse, msg.StopReason)
	require.Len(t, msg.Content, 3)
	assert.Equal(t, "ls is enough", msg.Content[0].Thinking)
	assert.Equal(t, "Listing.", msg.Content[1].Text)
	use := msg.Content[2]
	assert.Equal(t, "Bash", use.Name)
	assert.JSONEq(t, `{"command":"ls"}`, string(use.Input))
	assert.EqualValues(t, 100, msg.Usage.InputTokens)

	// the tool's result: the next step, not streamed this time
	params.Messages = append(params.Messages, msg.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "3 files", false)))
	reply, err := client.Messages.New(ctx, params)
	require.NoError(t, err)
	assert.Equal(t, anthropic.StopReasonEndTurn, reply.StopReason)
	require.Len(t, reply.Content, 1)
	assert.Equal(t, "There are 3 files.", reply.Content[0].Text)
	assert.Equal(t, []ToolResult{{ToolUseID: use.ID, ToolName: "Bash", Content: "3 files"}}, srv.ToolResults())
}

func TestAnthropicSDKSeesErrorsAndRetries(t *testing.T) {
	sc := &Scenario{Rules: []Rule{
		{Match: Match{Text: "busy"}, Times: 1, Steps: []Step{{Error: &ErrorStep{Status: 529, RetryAfter: "0"}}}},
		{Match: Match{Text: "busy"}, Steps: []Step{{Text: "recovered"}}},
		{Match: Match{Text: "bad"}, Steps: []Step{{Error: &ErrorStep{Status: 400, Message: "no such model"}}}},
	}}
	srv, err := Start(t, sc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ask := func(client anthropic.Client, prompt string) (*anthropic.Message, error) {
		return client.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-mock-1", MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}})
	}
	// the SDK retries the overloaded answer and gets the second rule's
	msg, err := ask(sdkClient(srv, 2), "busy")
	require.NoError(t, err)
	assert.Equal(t, "recovered", msg.Content[0].Text)
	statuses := []int{}
	for _, r := range srv.MainRequests() {
		statuses = append(statuses, r.Status)
	}
	assert.Equal(t, []int{529, 200}, statuses)
	// a client error is an *anthropic.Error with the status
	_, err = ask(sdkClient(srv, 0), "bad")
	var apiErr *anthropic.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	assert.Equal(t, 400, apiErr.StatusCode)
	assert.Contains(t, apiErr.Error(), "no such model")
}
