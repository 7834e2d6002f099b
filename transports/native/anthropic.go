package native

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
)

// anthropicDefaultURL is the Messages API when ANTHROPIC_BASE_URL is unset.
const anthropicDefaultURL = "https://api.anthropic.com"

// anthropicProvider speaks the Anthropic Messages API (streaming) through
// github.com/anthropics/anthropic-sdk-go. The SDK's own retries are off:
// retrying does them, with Retry-After. Requests are encoded through
// wire (anthropicwire.go), which has the SDK encode each message once.
// A provider serves one session, whose goroutine is its only caller.
type anthropicProvider struct {
	client  anthropic.Client
	baseURL string
	wire    anthropicWire
}

func newAnthropic(baseURL, apiKey, authToken string, httpc *http.Client) *anthropicProvider {
	if baseURL == "" {
		baseURL = anthropicDefaultURL
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(httpc),
		option.WithBaseURL(baseURL),
		option.WithMaxRetries(0),
	}
	if apiKey != "" {
		opts = append(opts, option.WithAPIKey(apiKey))
	} else {
		opts = append(opts, option.WithAuthToken(authToken))
	}
	return &anthropicProvider{client: anthropic.NewClient(opts...), baseURL: baseURL}
}

func (p *anthropicProvider) name() string     { return ProviderAnthropic }
func (p *anthropicProvider) endpoint() string { return p.baseURL }

// sdkParams is req as the SDK's parameters, every message and tool built
// afresh: what wire's encoding must equal (the tests), and the source of
// the request's fixed fields it encodes once per session.
func sdkParams(req request) anthropic.MessageNewParams {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(req.model),
		MaxTokens: req.maxTokens,
	}
	if req.system != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.system}}
	}
	if req.effort != "" {
		params.OutputConfig = anthropic.OutputConfigParam{Effort: anthropic.OutputConfigEffort(clampEffort(req.effort, true))}
	}
	for _, t := range req.tools {
		params.Tools = append(params.Tools, sdkTool(t))
	}
	for _, m := range req.messages {
		if mp, ok := sdkMessage(m); ok {
			params.Messages = append(params.Messages, mp)
		}
	}
	return params
}

// sdkMessage is m as the SDK's message; false when none of its blocks is
// sent (the message is left out).
func sdkMessage(m message) (anthropic.MessageParam, bool) {
	var blocks []anthropic.ContentBlockParamUnion
	for _, b := range m.blocks {
		switch b.kind {
		case blockText:
			if b.text != "" {
				blocks = append(blocks, anthropic.NewTextBlock(b.text))
			}
		case blockThinking:
			blocks = append(blocks, anthropic.NewThinkingBlock(b.signature, b.text))
		case blockToolUse:
			blocks = append(blocks, anthropic.NewToolUseBlock(b.id, json.RawMessage(orEmptyObject(b.input)), b.name))
		case blockToolResult:
			blocks = append(blocks, anthropic.NewToolResultBlock(b.id, b.text, b.isError))
		case blockOpaque:
			if b.rawOwner == ProviderAnthropic {
				blocks = append(blocks, param.Override[anthropic.ContentBlockParamUnion](b.raw))
			}
		}
	}
	if len(blocks) == 0 {
		return anthropic.MessageParam{}, false
	}
	if m.role == roleAssistant {
		return anthropic.NewAssistantMessage(blocks...), true
	}
	return anthropic.NewUserMessage(blocks...), true
}

// sdkTool is t as the SDK's tool definition.
func sdkTool(t ToolSpec) anthropic.ToolUnionParam {
	tp := anthropic.ToolParam{
		Name:        t.Name,
		Description: param.NewOpt(t.Description),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: t.Schema["properties"]},
	}
	if r, ok := t.Schema["required"].([]string); ok {
		tp.InputSchema.Required = r
	}
	return anthropic.ToolUnionParam{OfTool: &tp}
}

func orEmptyObject(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return json.RawMessage(`{}`)
	}
	return b
}

// stream makes one streamed call. The body is wire's (the request as the
// SDK would encode it, "stream": true included, as NewStreaming adds it),
// sent through the SDK's client as a POST like NewStreaming's, so the
// SDK neither encodes the parameters again nor rewrites the body to set
// "stream" (each a pass over the whole conversation); the answer is read
// by decodeStream (anthropicstream.go). The body goes as Post's params:
// the SDK sends a []byte as it is, with NewStreaming's Content-Type
// (application/json), and builds the request with no option of ours to
// apply and no empty override to encode on every call.
func (p *anthropicProvider) stream(ctx context.Context, req request, emit func(delta)) (response, error) {
	body, err := p.wire.body(req)
	if err != nil {
		return response{}, err
	}
	var raw *http.Response
	err = p.client.Post(ctx, "v1/messages", body, &raw)
	st := ssestream.NewStream[streamEvent](ssestream.NewDecoder(raw), err)
	defer st.Close()
	resp, err := decodeStream(st, emit)
	if err != nil {
		return response{}, p.apiError(err)
	}
	return resp, nil
}

// apiError turns the SDK's error into an *apiError (an HTTP answer) or
// keeps it (a connection failure, a broken stream).
func (p *anthropicProvider) apiError(err error) error {
	var ae *anthropic.Error
	if !errors.As(err, &ae) {
		return err
	}
	out := &apiError{provider: ProviderAnthropic, endpoint: p.baseURL, status: ae.StatusCode, message: ae.Message}
	if ae.Response != nil {
		out.retryAfter = retryAfter(ae.Response.Header, time.Now())
	}
	return out
}
