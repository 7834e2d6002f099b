package native

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/codesession/codesession/messages"
)

// openaiDefaultURL is the OpenAI API when OPENAI_BASE_URL is unset.
const openaiDefaultURL = "https://api.openai.com/v1"

func newOpenAIClient(baseURL, apiKey string, httpc *http.Client) (openai.Client, string) {
	if baseURL == "" {
		baseURL = openaiDefaultURL
	}
	return openai.NewClient(
		option.WithHTTPClient(httpc),
		option.WithBaseURL(baseURL),
		option.WithAPIKey(apiKey),
		option.WithMaxRetries(0),
		// The process's organization and project are not the backend's.
		option.WithHeaderDel("OpenAI-Organization"),
		option.WithHeaderDel("OpenAI-Project"),
	), baseURL
}

// openaiError turns the SDK's error into an *apiError, or keeps it.
func openaiError(provider, endpoint string, err error) error {
	var ae *openai.Error
	if !errors.As(err, &ae) {
		return err
	}
	out := &apiError{provider: provider, endpoint: endpoint, status: ae.StatusCode, message: ae.Message}
	if ae.Response != nil {
		out.retryAfter = retryAfter(ae.Response.Header, time.Now())
	}
	return out
}

func openaiEffort(e messages.Effort) shared.ReasoningEffort {
	return shared.ReasoningEffort(clampEffort(e, true))
}

// responsesProvider speaks the OpenAI Responses API (streaming).
type responsesProvider struct {
	client  openai.Client
	baseURL string
}

func newResponses(baseURL, apiKey string, httpc *http.Client) *responsesProvider {
	c, u := newOpenAIClient(baseURL, apiKey, httpc)
	return &responsesProvider{client: c, baseURL: u}
}

func (p *responsesProvider) name() string     { return ProviderOpenAIResponses }
func (p *responsesProvider) endpoint() string { return p.baseURL }

func (p *responsesProvider) params(req request) responses.ResponseNewParams {
	params := responses.ResponseNewParams{
		Model:           shared.ResponsesModel(req.model),
		MaxOutputTokens: param.NewOpt(req.maxTokens),
	}
	if req.system != "" {
		params.Instructions = param.NewOpt(req.system)
	}
	if req.effort != "" {
		params.Reasoning = shared.ReasoningParam{Effort: openaiEffort(req.effort)}
	}
	for _, t := range req.tools {
		ft := responses.FunctionToolParam{Name: t.Name, Parameters: t.Schema, Strict: param.NewOpt(false),
			Description: param.NewOpt(t.Description)}
		params.Tools = append(params.Tools, responses.ToolUnionParam{OfFunction: &ft})
	}
	var items responses.ResponseInputParam
	for _, m := range req.messages {
		if m.role == roleAssistant {
			// The model's own output items go back verbatim (reasoning
			// included); blocks made elsewhere are rebuilt.
			own := false
			for _, b := range m.blocks {
				if b.kind == blockOpaque && b.rawOwner == ProviderOpenAIResponses {
					items = append(items, param.Override[responses.ResponseInputItemUnionParam](b.raw))
					own = true
				}
			}
			if own {
				continue
			}
			for _, b := range m.blocks {
				switch b.kind {
				case blockText:
					items = append(items, responses.ResponseInputItemParamOfMessage(b.text, responses.EasyInputMessageRoleAssistant))
				case blockToolUse:
					items = append(items, responses.ResponseInputItemParamOfFunctionCall(string(orEmptyObject(b.input)), b.id, b.name))
				}
			}
			continue
		}
		for _, b := range m.blocks {
			switch b.kind {
			case blockText:
				if b.text != "" {
					items = append(items, responses.ResponseInputItemParamOfMessage(b.text, responses.EasyInputMessageRoleUser))
				}
			case blockToolResult:
				out := b.text
				if b.isError {
					out = "ERROR: " + out
				}
				fo := responses.ResponseInputItemParamOfFunctionCallOutput(out)
				fo.OfFunctionCallOutput.CallID = param.NewOpt(b.id)
				items = append(items, fo)
			}
		}
	}
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: items}
	return params
}

func (p *responsesProvider) stream(ctx context.Context, req request, emit func(delta)) (response, error) {
	st := p.client.Responses.NewStreaming(ctx, p.params(req))
	defer st.Close()
	var done *responses.Response
	var failure string
	for st.Next() {
		ev := st.Current()
		switch ev.Type {
		case "response.output_text.delta":
			if ev.Delta != "" {
				emit(delta{text: ev.Delta})
			}
		case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
			if ev.Delta != "" {
				emit(delta{thinking: true, text: ev.Delta})
			}
		case "response.completed", "response.incomplete":
			r := ev.Response
			done = &r
		case "response.failed":
			failure = ev.Response.Error.Message
			if failure == "" {
				failure = "the response failed"
			}
		case "error":
			failure = ev.Message
		}
	}
	if err := st.Err(); err != nil {
		return response{}, openaiError(p.name(), p.baseURL, err)
	}
	if failure != "" {
		return response{}, errors.New(p.name() + " endpoint " + p.baseURL + ": " + failure)
	}
	if done == nil {
		return response{}, errors.New(p.name() + " endpoint " + p.baseURL + ": the stream ended without response.completed")
	}
	resp := response{model: done.Model, stop: "end_turn", usage: messages.Usage{
		InputTokens:     done.Usage.InputTokens - done.Usage.InputTokensDetails.CachedTokens,
		OutputTokens:    done.Usage.OutputTokens,
		CacheReadTokens: done.Usage.InputTokensDetails.CachedTokens,
	}}
	if done.Status == "incomplete" {
		resp.stop = "max_tokens"
	}
	for _, it := range done.Output {
		if raw := it.RawJSON(); raw != "" {
			resp.blocks = append(resp.blocks, block{kind: blockOpaque, raw: json.RawMessage(raw), rawOwner: ProviderOpenAIResponses})
		}
		switch it.Type {
		case "message":
			var parts []string
			for _, c := range it.Content {
				if c.Type == "output_text" {
					parts = append(parts, c.Text)
				}
			}
			if t := strings.Join(parts, ""); t != "" {
				resp.blocks = append(resp.blocks, block{kind: blockText, text: t})
			}
		case "function_call":
			resp.blocks = append(resp.blocks, block{kind: blockToolUse, id: it.CallID, name: it.Name,
				input: argsJSON(it.Arguments.OfString)})
			resp.stop = "tool_use"
		}
	}
	return resp, nil
}

// argsJSON is a function call's arguments string as a JSON object; a
// malformed one becomes {} (the tool then says what is missing).
func argsJSON(s string) json.RawMessage {
	if s == "" || !json.Valid([]byte(s)) {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(s)
}

// chatProvider speaks the OpenAI Chat Completions API (streaming), which
// most local model servers and proxies offer.
type chatProvider struct {
	client  openai.Client
	baseURL string
}

func newChat(baseURL, apiKey string, httpc *http.Client) *chatProvider {
	c, u := newOpenAIClient(baseURL, apiKey, httpc)
	return &chatProvider{client: c, baseURL: u}
}

func (p *chatProvider) name() string     { return ProviderOpenAIChat }
func (p *chatProvider) endpoint() string { return p.baseURL }

func (p *chatProvider) params(req request) openai.ChatCompletionNewParams {
	params := openai.ChatCompletionNewParams{
		Model:               shared.ChatModel(req.model),
		MaxCompletionTokens: param.NewOpt(req.maxTokens),
		StreamOptions:       openai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
	}
	if req.effort != "" {
		params.ReasoningEffort = openaiEffort(req.effort)
	}
	for _, t := range req.tools {
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: param.NewOpt(t.Description), Parameters: shared.FunctionParameters(t.Schema)}))
	}
	if req.system != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.system))
	}
	for _, m := range req.messages {
		if m.role == roleAssistant {
			var am openai.ChatCompletionAssistantMessageParam
			var text []string
			for _, b := range m.blocks {
				switch b.kind {
				case blockText:
					text = append(text, b.text)
				case blockToolUse:
					am.ToolCalls = append(am.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
						OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: b.id,
							Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.name, Arguments: string(orEmptyObject(b.input))}}})
				}
			}
			if len(text) > 0 {
				am.Content.OfString = param.NewOpt(strings.Join(text, "\n"))
			}
			if len(text) == 0 && len(am.ToolCalls) == 0 {
				continue
			}
			params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &am})
			continue
		}
		for _, b := range m.blocks {
			switch b.kind {
			case blockText:
				if b.text != "" {
					params.Messages = append(params.Messages, openai.UserMessage(b.text))
				}
			case blockToolResult:
				out := b.text
				if b.isError {
					out = "ERROR: " + out
				}
				params.Messages = append(params.Messages, openai.ToolMessage(out, b.id))
			}
		}
	}
	return params
}

func (p *chatProvider) stream(ctx context.Context, req request, emit func(delta)) (response, error) {
	st := p.client.Chat.Completions.NewStreaming(ctx, p.params(req))
	defer st.Close()
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		ch := st.Current()
		acc.AddChunk(ch)
		for _, c := range ch.Choices {
			if c.Index == 0 && c.Delta.Content != "" {
				emit(delta{text: c.Delta.Content})
			}
		}
	}
	if err := st.Err(); err != nil {
		return response{}, openaiError(p.name(), p.baseURL, err)
	}
	resp := response{model: acc.Model, stop: "end_turn", usage: messages.Usage{
		InputTokens:     acc.Usage.PromptTokens - acc.Usage.PromptTokensDetails.CachedTokens,
		OutputTokens:    acc.Usage.CompletionTokens,
		CacheReadTokens: acc.Usage.PromptTokensDetails.CachedTokens,
	}}
	if len(acc.Choices) == 0 {
		return resp, nil
	}
	c := acc.Choices[0]
	switch c.FinishReason {
	case "length":
		resp.stop = "max_tokens"
	case "tool_calls":
		resp.stop = "tool_use"
	}
	if c.Message.Content != "" {
		resp.blocks = append(resp.blocks, block{kind: blockText, text: c.Message.Content})
	}
	for _, tc := range c.Message.ToolCalls {
		resp.blocks = append(resp.blocks, block{kind: blockToolUse, id: tc.ID, name: tc.Function.Name, input: argsJSON(tc.Function.Arguments)})
	}
	return resp, nil
}

// newProvider picks the provider and its endpoint from the backend
// environment: CODESESSION_NATIVE_PROVIDER, else anthropic when an
// Anthropic key is set, else openai-responses.
func newProvider(get func(string) string, httpc *http.Client) (provider, error) {
	name := get(EnvProvider)
	if name == "" {
		name = ProviderOpenAIResponses
		if get(EnvAnthropicAPIKey) != "" || get(EnvAnthropicAuthToken) != "" {
			name = ProviderAnthropic
		}
	}
	switch name {
	case ProviderAnthropic:
		key, token := get(EnvAnthropicAPIKey), get(EnvAnthropicAuthToken)
		if key == "" && token == "" {
			return nil, messages.FieldError(messages.OpStart, "env."+EnvAnthropicAPIKey,
				"the native backend's anthropic provider needs %s (or %s) in the backend environment (config env or --env)", EnvAnthropicAPIKey, EnvAnthropicAuthToken)
		}
		return newAnthropic(get(EnvAnthropicBaseURL), key, token, httpc), nil
	case ProviderOpenAIResponses, ProviderOpenAIChat:
		key := get(EnvOpenAIAPIKey)
		if key == "" {
			return nil, messages.FieldError(messages.OpStart, "env."+EnvOpenAIAPIKey,
				"the native backend's %s provider needs %s in the backend environment (config env or --env); "+
					"for Anthropic set %s, or %s=anthropic", name, EnvOpenAIAPIKey, EnvAnthropicAPIKey, EnvProvider)
		}
		if name == ProviderOpenAIChat {
			return newChat(get(EnvOpenAIBaseURL), key, httpc), nil
		}
		return newResponses(get(EnvOpenAIBaseURL), key, httpc), nil
	}
	return nil, messages.FieldError(messages.OpStart, "env."+EnvProvider, "unknown provider %q (want %s, %s or %s)",
		name, ProviderAnthropic, ProviderOpenAIResponses, ProviderOpenAIChat)
}
