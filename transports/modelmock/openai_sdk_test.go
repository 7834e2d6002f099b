package modelmock

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The official OpenAI Go SDK reads what the mock serves on the Responses
// and Chat Completions wires.

func openaiClient(srv *Server, retries int) openai.Client {
	return openai.NewClient(option.WithBaseURL(srv.URL()+"/v1"), option.WithAPIKey("sk-test"),
		option.WithMaxRetries(retries), option.WithHeaderDel("OpenAI-Organization"), option.WithHeaderDel("OpenAI-Project"))
}

// toolScenario answers "list the files" with thinking, text and a Bash
// call, then the tool's result with text.
func toolScenario() *Scenario {
	return &Scenario{Rules: []Rule{
		{Match: Match{Text: "list the files"}, Steps: []Step{
			{Thinking: "ls is enough", Text: "Listing.", Chunks: 3, Tool: &ToolCall{Name: "Bash", Input: json.RawMessage(`{"command":"ls"}`)}},
			{Text: "There are {{result}}."},
		}},
		{Match: Match{Text: "busy"}, Times: 1, Steps: []Step{{Error: &ErrorStep{Status: 429, RetryAfter: "0"}}}},
		{Match: Match{Text: "busy"}, Steps: []Step{{Text: "recovered"}}},
		{Match: Match{Text: "bad"}, Steps: []Step{{Error: &ErrorStep{Status: 400, Message: "no such model"}}}},
	}}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestResponsesSDKStreamsAToolTurn(t *testing.T) {
	srv, err := Start(t, toolScenario())
	require.NoError(t, err)
	client := openaiClient(srv, 0)
	ctx := testCtx(t)
	params := responses.ResponseNewParams{Model: "gpt-mock", Instructions: param.NewOpt("be brief"),
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "Bash",
			Parameters: map[string]any{"type": "object"}}}},
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("list the files", responses.EasyInputMessageRoleUser)}}}

	stream := client.Responses.NewStreaming(ctx, params)
	var types []string
	var text, thinking, args string
	var done *responses.Response
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
		case "response.reasoning_summary_text.delta":
			thinking += ev.Delta
		case "response.function_call_arguments.delta":
			args += ev.Delta
		case "response.completed":
			r := ev.Response
			done = &r
		}
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())
	assert.Equal(t, "Listing.", text)
	assert.Equal(t, "ls is enough", thinking)
	assert.JSONEq(t, `{"command":"ls"}`, args)
	assert.Equal(t, "response.created", types[0])
	assert.Equal(t, "response.completed", types[len(types)-1])
	assert.Contains(t, types, "response.output_item.added")
	assert.Contains(t, types, "response.function_call_arguments.done")
	assert.Contains(t, types, "response.output_item.done")
	require.NotNil(t, done)
	assert.Equal(t, responses.ResponseStatusCompleted, done.Status)
	assert.EqualValues(t, 100, done.Usage.InputTokens)
	assert.EqualValues(t, 20, done.Usage.OutputTokens)
	assert.Equal(t, "Listing.", done.OutputText())
	require.Len(t, done.Output, 3)
	assert.Equal(t, "reasoning", done.Output[0].Type)
	call := done.Output[2]
	require.Equal(t, "function_call", call.Type)
	assert.Equal(t, "Bash", call.Name)
	assert.JSONEq(t, `{"command":"ls"}`, call.Arguments.OfString)

	conv := srv.MainRequests()[0].Conversation()
	assert.Equal(t, "be brief", conv.System)
	assert.Equal(t, []string{"Bash"}, conv.Tools)
	assert.Equal(t, "openai-responses", srv.MainRequests()[0].Wire)

	// the tool's result, not streamed: the model's own items go back verbatim
	items := params.Input.OfInputItemList
	for _, it := range done.Output {
		items = append(items, param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(it.RawJSON())))
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput("3 files")
	out.OfFunctionCallOutput.CallID = param.NewOpt(call.CallID)
	params.Input.OfInputItemList = append(items, out)
	reply, err := client.Responses.New(ctx, params)
	require.NoError(t, err)
	assert.Equal(t, "There are 3 files.", reply.OutputText())
	assert.Equal(t, []ToolResult{{ToolUseID: call.CallID, ToolName: "Bash", Content: "3 files"}}, srv.ToolResults())
	assert.Equal(t, 0, srv.MainRequests()[1].Rule, "the rule that started the turn answers its second step")
}

func TestChatSDKStreamsAToolTurn(t *testing.T) {
	srv, err := Start(t, toolScenario())
	require.NoError(t, err)
	client := openaiClient(srv, 0)
	ctx := testCtx(t)
	params := openai.ChatCompletionNewParams{Model: "gpt-mock",
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "Bash", Parameters: openai.FunctionParameters{"type": "object"}})},
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("list the files")}}

	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	var deltas []string
	for stream.Next() {
		ch := stream.Current()
		require.True(t, acc.AddChunk(ch))
		for _, c := range ch.Choices {
			if c.Delta.Content != "" {
				deltas = append(deltas, c.Delta.Content)
			}
		}
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())
	assert.Equal(t, []string{"Li", "sti", "ng."}, deltas, "three chunks")
	require.Len(t, acc.Choices, 1)
	c := acc.Choices[0]
	assert.EqualValues(t, "tool_calls", c.FinishReason)
	assert.Equal(t, "Listing.", c.Message.Content)
	require.Len(t, c.Message.ToolCalls, 1)
	tc := c.Message.ToolCalls[0]
	assert.Equal(t, "Bash", tc.Function.Name)
	assert.JSONEq(t, `{"command":"ls"}`, tc.Function.Arguments)
	assert.EqualValues(t, 100, acc.Usage.PromptTokens)
	assert.EqualValues(t, 20, acc.Usage.CompletionTokens)
	conv := srv.MainRequests()[0].Conversation()
	assert.Equal(t, "be brief", conv.System)
	assert.Equal(t, []string{"Bash"}, conv.Tools)
	assert.Equal(t, "openai-chat", srv.MainRequests()[0].Wire)

	// the tool's result, not streamed
	params.Messages = append(params.Messages, c.Message.ToParam(), openai.ToolMessage("3 files", tc.ID))
	reply, err := client.Chat.Completions.New(ctx, params)
	require.NoError(t, err)
	require.Len(t, reply.Choices, 1)
	assert.EqualValues(t, "stop", reply.Choices[0].FinishReason)
	assert.Equal(t, "There are 3 files.", reply.Choices[0].Message.Content)
	assert.EqualValues(t, 120, reply.Usage.TotalTokens)
	assert.Equal(t, []ToolResult{{ToolUseID: tc.ID, ToolName: "Bash", Content: "3 files"}}, srv.ToolResults())
}

func TestChatStreamWithoutUsageOption(t *testing.T) {
	srv, err := Start(t, &Scenario{})
	require.NoError(t, err)
	client := openaiClient(srv, 0)
	stream := client.Chat.Completions.NewStreaming(testCtx(t), openai.ChatCompletionNewParams{Model: "gpt-mock",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("ping")}})
	var acc openai.ChatCompletionAccumulator
	n := 0
	for stream.Next() {
		n++
		require.True(t, acc.AddChunk(stream.Current()))
		assert.NotEmpty(t, stream.Current().Choices, "no usage chunk unless asked")
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, "PONG(model=gpt-mock): ping", acc.Choices[0].Message.Content)
	assert.Equal(t, 3, n)
}

func TestOpenAISDKSeesErrorsAndRetries(t *testing.T) {
	for _, wire := range []string{"responses", "chat"} {
		t.Run(wire, func(t *testing.T) {
			srv, err := Start(t, toolScenario())
			require.NoError(t, err)
			ctx := testCtx(t)
			ask := func(client openai.Client, prompt string) (string, error) {
				if wire == "chat" {
					r, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-mock",
						Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}})
					if err != nil {
						return "", err
					}
					return r.Choices[0].Message.Content, nil
				}
				r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-mock",
					Input: responses.ResponseNewParamsInputUnion{OfString: param.NewOpt(prompt)}})
				if err != nil {
					return "", err
				}
				return r.OutputText(), nil
			}
			// the SDK retries the 429 and gets the second rule's answer
			text, err := ask(openaiClient(srv, 2), "busy")
			require.NoError(t, err)
			assert.Equal(t, "recovered", text)
			var statuses []int
			for _, r := range srv.MainRequests() {
				statuses = append(statuses, r.Status)
			}
			assert.Equal(t, []int{429, 200}, statuses)
			// a client error is an *openai.Error with the status
			_, err = ask(openaiClient(srv, 0), "bad")
			var apiErr *openai.Error
			require.True(t, errors.As(err, &apiErr), "%v", err)
			assert.Equal(t, 400, apiErr.StatusCode)
			assert.Equal(t, "no such model", apiErr.Message)
		})
	}
}

func TestOpenAIErrorCarriesRetryAfter(t *testing.T) {
	srv, err := Start(t, toolScenario())
	require.NoError(t, err)
	for _, path := range []string{"/v1/responses", "/v1/chat/completions"} {
		body := `{"model":"m","input":"busy"}`
		if strings.Contains(path, "chat") {
			body = `{"model":"m","messages":[{"role":"user","content":"busy"}]}`
		}
		resp, err := http.Post(srv.URL()+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		var e struct {
			Error struct {
				Type, Message string
			}
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
		resp.Body.Close()
		if path == "/v1/responses" {
			assert.Equal(t, 429, resp.StatusCode)
			assert.Equal(t, "0", resp.Header.Get("Retry-After"))
			assert.Equal(t, "rate_limit_error", e.Error.Type)
		} else {
			assert.Equal(t, 200, resp.StatusCode, "the 429 rule answers once")
		}
	}
}

// The request shapes real clients send (as captured from them):
// Codex's developer messages and input_text parts, opencode's and
// copilot's role tool messages and null content.
func TestOpenAIDecodesClientShapes(t *testing.T) {
	c, err := decodeResponses([]byte(`{"model":"gpt-5.5","stream":true,"input":[
	 {"type":"message","role":"developer","content":[{"type":"input_text","text":"You are Codex"}]},
	 {"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>cwd</environment_context>"}]},
	 {"type":"message","role":"user","content":[{"type":"input_text","text":"TOOL:SHELL echo hi"}]},
	 {"type":"reasoning","summary":[{"type":"summary_text","text":"hmm"}]},
	 {"type":"function_call","call_id":"call_1","name":"exec_command","arguments":"{\"cmd\":\"echo hi\"}"},
	 {"type":"function_call_output","call_id":"call_1","output":"hi"}],
	 "tools":[{"type":"function","name":"exec_command"},{"type":"web_search"}]}`))
	require.NoError(t, err)
	assert.Equal(t, "You are Codex", c.System)
	assert.True(t, c.Stream)
	assert.Equal(t, []string{"exec_command", "web_search"}, c.Tools)
	assert.Equal(t, "TOOL:SHELL echo hi", c.LastUserText())
	tr, ok := c.LastToolResult()
	require.True(t, ok)
	assert.Equal(t, ToolResult{ToolUseID: "call_1", ToolName: "exec_command", Content: "hi"}, tr)
	require.Len(t, c.Messages, 3, "user, assistant (reasoning and call), user (result)")

	c, _, err = decodeChat([]byte(`{"model":"mock-model","messages":[
	 {"role":"system","content":"You are opencode"},
	 {"role":"user","content":"TOOL:SHELL echo via-acp"},
	 {"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_5","type":"function","function":{"name":"bash","arguments":"{\"command\":\"echo\"}"}}]},
	 {"role":"tool","tool_call_id":"call_5","content":"(no output)"}],
	 "tools":[{"type":"function","function":{"name":"bash"}}],"stream":true,"stream_options":{"include_usage":true}}`))
	require.NoError(t, err)
	assert.Equal(t, "You are opencode", c.System)
	assert.Equal(t, []string{"bash"}, c.Tools)
	tr, ok = c.LastToolResult()
	require.True(t, ok)
	assert.Equal(t, ToolResult{ToolUseID: "call_5", ToolName: "bash", Content: "(no output)"}, tr)
	assert.Equal(t, "TOOL:SHELL echo via-acp", c.LastUserText())
}

func TestOpenAIProbes(t *testing.T) {
	srv, err := Start(t, nil)
	require.NoError(t, err)
	for _, p := range []string{"/v1/responses", "/v1/models"} {
		resp, err := http.Get(srv.URL() + p)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode, p)
	}
	for _, r := range srv.Requests() {
		assert.Equal(t, KindProbe, r.Kind)
	}
}
