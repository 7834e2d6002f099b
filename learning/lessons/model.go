package lessons

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
)

// Model is the cheap model the pass asks: one system prompt, one user
// prompt, the answer's text.
type Model interface {
	Complete(ctx context.Context, system, prompt string) (string, error)
	// Name is the concrete model id, for the report.
	Name() string
}

// Providers the distiller speaks (the native backend's, through the same SDKs).
const (
	ProviderAnthropic  = "anthropic"
	ProviderOpenAIChat = "openai-chat"
)

// Default cheap models per provider.
var DefaultModels = map[string]string{
	ProviderAnthropic:  "claude-haiku-4-5",
	ProviderOpenAIChat: "gpt-5-mini",
}

// ModelConfig picks the distiller's model. Empty fields take the
// environment (getenv): ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY (or
// ANTHROPIC_AUTH_TOKEN), OPENAI_BASE_URL and OPENAI_API_KEY, as the native
// backend reads them; the provider defaults to anthropic when an Anthropic
// key is set, else openai-chat.
type ModelConfig struct {
	Provider string
	Model    string
	Timeout  time.Duration
}

// NewModel builds the thin client.
func NewModel(c ModelConfig, getenv func(string) string) (Model, error) {
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Minute
	}
	httpc := &http.Client{Timeout: c.Timeout}
	provider := c.Provider
	if provider == "" {
		provider = ProviderOpenAIChat
		if getenv("ANTHROPIC_API_KEY") != "" || getenv("ANTHROPIC_AUTH_TOKEN") != "" {
			provider = ProviderAnthropic
		}
	}
	model := c.Model
	if model == "" {
		model = DefaultModels[provider]
	}
	switch provider {
	case ProviderAnthropic:
		key, token := getenv("ANTHROPIC_API_KEY"), getenv("ANTHROPIC_AUTH_TOKEN")
		if key == "" && token == "" {
			return nil, fmt.Errorf("the lesson distiller needs ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN")
		}
		opts := []aoption.RequestOption{aoption.WithoutEnvironmentDefaults(), aoption.WithHTTPClient(httpc), aoption.WithMaxRetries(2)}
		if u := getenv("ANTHROPIC_BASE_URL"); u != "" {
			opts = append(opts, aoption.WithBaseURL(u))
		}
		if key != "" {
			opts = append(opts, aoption.WithAPIKey(key))
		} else {
			opts = append(opts, aoption.WithAuthToken(token))
		}
		return &anthropicModel{client: anthropic.NewClient(opts...), model: model}, nil
	case ProviderOpenAIChat:
		key := getenv("OPENAI_API_KEY")
		if key == "" {
			return nil, fmt.Errorf("the lesson distiller needs OPENAI_API_KEY (or an Anthropic key)")
		}
		opts := []ooption.RequestOption{ooption.WithHTTPClient(httpc), ooption.WithAPIKey(key), ooption.WithMaxRetries(2),
			ooption.WithHeaderDel("OpenAI-Organization"), ooption.WithHeaderDel("OpenAI-Project")}
		if u := getenv("OPENAI_BASE_URL"); u != "" {
			opts = append(opts, ooption.WithBaseURL(u))
		}
		return &chatModel{client: openai.NewClient(opts...), model: model}, nil
	default:
		return nil, fmt.Errorf("unknown distiller provider %q (want %s or %s)", provider, ProviderAnthropic, ProviderOpenAIChat)
	}
}

type anthropicModel struct {
	client anthropic.Client
	model  string
}

func (m *anthropicModel) Name() string { return m.model }

func (m *anthropicModel) Complete(ctx context.Context, system, prompt string) (string, error) {
	msg, err := m.client.Messages.New(ctx, anthropic.MessageNewParams{
		Model: anthropic.Model(m.model), MaxTokens: 2048,
		System:   []anthropic.TextBlockParam{{Text: system}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
	})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, c := range msg.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String(), nil
}

type chatModel struct {
	client openai.Client
	model  string
}

func (m *chatModel) Name() string { return m.model }

func (m *chatModel) Complete(ctx context.Context, system, prompt string) (string, error) {
	resp, err := m.client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    m.model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage(prompt)},
	})
	if err != nil {
		return "", err
	}
	if len(resp.Choices) == 0 {
		return "", fmt.Errorf("the model answered no choices")
	}
	return resp.Choices[0].Message.Content, nil
}
