package lessons

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/learning/outcomes"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/modelmock"
)

// The thin clients speak to the scripted model server through the real
// SDKs: the Anthropic Messages wire and OpenAI Chat Completions.
func TestPassAgainstModelmock(t *testing.T) {
	answer := `{"lessons":[{"text":"codex with gpt-5 finishes bounded bug fixes in few rounds","backend":"codex","model":"gpt-5","tags":["bugfix"],"sessions":["sa","sb"],"reinforces":""}]}`
	sc := &modelmock.Scenario{Rules: []modelmock.Rule{
		{Match: modelmock.Match{Regex: `New outcomes`}, Steps: []modelmock.Step{{Text: answer}}},
	}}
	srv, err := modelmock.Start(t, sc)
	require.NoError(t, err)
	all := []outcomes.Record{
		{SessionID: "sa", BackendID: "codex", Model: "gpt-5", Outcome: messages.OutcomeSuccess, StartRevision: "r1"},
		{SessionID: "sb", BackendID: "codex", Model: "gpt-5", Outcome: messages.OutcomeSuccess, StartRevision: "r2"},
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		path string
	}{
		{"anthropic", map[string]string{"ANTHROPIC_BASE_URL": srv.URL(), "ANTHROPIC_API_KEY": "sk-ant-test"}, "/v1/messages"},
		{"openai-chat", map[string]string{"OPENAI_BASE_URL": srv.URL() + "/v1", "OPENAI_API_KEY": "sk-test"}, "/v1/chat/completions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewModel(ModelConfig{}, func(k string) string { return tc.env[k] })
			require.NoError(t, err)
			st := NewStore(t.TempDir())
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rep, err := Pass(ctx, st, all, PassOptions{Model: m, Now: t0})
			require.NoError(t, err)
			assert.Equal(t, 1, rep.Created)
			assert.Equal(t, DefaultModels[tc.name], rep.Model, "the configured cheap model")
			book, err := st.Load()
			require.NoError(t, err)
			require.Len(t, book.Lessons, 1)
			assert.Equal(t, 2, book.Lessons[0].Evidence)
			block := Block(book, Filter{Backend: "codex", Model: "gpt-5", Known: []string{"codex"}}, t0)
			assert.Contains(t, block, "finishes bounded bug fixes")
			var seen bool
			for _, r := range srv.Requests() {
				if r.Path == tc.path {
					seen = true
				}
			}
			assert.True(t, seen, "the model server saw %s", tc.path)
		})
	}
}

func TestNewModelNeedsAKey(t *testing.T) {
	_, err := NewModel(ModelConfig{}, func(string) string { return "" })
	assert.Error(t, err)
	_, err = NewModel(ModelConfig{Provider: "gemini"}, func(string) string { return "k" })
	assert.Error(t, err)
}
