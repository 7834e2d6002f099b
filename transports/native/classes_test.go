package native

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/codesession/codesession/learning/routing"
)

// native maps cheap/standard/frontier to concrete models (issue 40: they
// fell back to the default and its routing guidance was empty), and an
// OpenAI session gets its own provider's model of the class.
func TestModelClassMap(t *testing.T) {
	d := New().Descriptor()
	for _, class := range []string{"cheap", "standard", "frontier"} {
		assert.NotEmpty(t, routing.ResolveModel(d, class), class)
	}
	assert.Equal(t, "claude-haiku-5-5", routing.ResolveModel(d, "cheap"))
	assert.NotEmpty(t, routing.GuidanceLines(d), "list-backends gives routing guidance")
	assert.Equal(t, "gpt-5.4-mini", providerModel(ProviderOpenAIResponses, routing.ResolveModel(d, "cheap")))
	assert.Equal(t, "claude-opus-5-5", providerModel(ProviderAnthropic, routing.ResolveModel(d, "frontier")))
	assert.Equal(t, "my-model", providerModel(ProviderOpenAIChat, "my-model"), "a concrete name stays")
	assert.Equal(t, "", providerModel(ProviderOpenAIChat, ""))
}
