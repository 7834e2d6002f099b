package routing

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

func desc() messages.Descriptor {
	return messages.Descriptor{ID: "cc", ModelSelection: messages.ModelPerTurn, EffortSupport: messages.EffortAtStart,
		EffortMap:     map[messages.Effort]string{messages.EffortLow: "low", messages.EffortHigh: "high"},
		ModelClassMap: map[string]string{ClassCheap: "haiku", ClassStandard: "", ClassFrontier: "opus"},
		Cost:          messages.CostSubscription}
}

func TestResolveModel(t *testing.T) {
	d := desc()
	assert.Equal(t, "haiku", ResolveModel(d, "cheap"))
	assert.Equal(t, "", ResolveModel(d, "standard"), "a null entry lets the backend choose")
	assert.Equal(t, "", ResolveModel(messages.Descriptor{}, "frontier"), "no map lets the backend choose")
	assert.Equal(t, "claude-sonnet-4-5", ResolveModel(d, "claude-sonnet-4-5"), "a concrete id passes")
	assert.Equal(t, "", ResolveModel(d, ""))
	for _, c := range Classes {
		assert.False(t, IsClass(ResolveModel(d, c)), "a sentinel never comes out")
	}
}

func TestEffortChecks(t *testing.T) {
	d := desc()
	require.NoError(t, CheckStart("start", d, messages.EffortHigh))
	require.NoError(t, CheckStart("start", d, ""))
	err := CheckStart("start", d, messages.EffortMax)
	assert.True(t, messages.IsCode(err, messages.CodeUnsupported), "no mechanism named for max")
	d.EffortSupport = messages.EffortNone
	assert.True(t, messages.IsCode(CheckStart("start", d, messages.EffortLow), messages.CodeUnsupported))
	d.EffortSupport = ""
	assert.True(t, messages.IsCode(CheckStart("start", d, messages.EffortLow), messages.CodeUnsupported), "absent support rejects")

	d = desc()
	require.NoError(t, CheckSwitch("guide", d, "haiku", ""))
	assert.True(t, messages.IsCode(CheckSwitch("guide", d, "", messages.EffortLow), messages.CodeUnsupported), "effort at start only")
	d.EffortSupport = messages.EffortPerTurn
	require.NoError(t, CheckSwitch("guide", d, "", messages.EffortLow))
	d.ModelSelection = messages.ModelPerSession
	assert.True(t, messages.IsCode(CheckSwitch("guide", d, "haiku", ""), messages.CodeUnsupported))
}

func TestGuidanceLines(t *testing.T) {
	lines := GuidanceLines(desc())
	assert.Equal(t, "effort: at start only (low->low, high->high); other levels are rejected", lines[0])
	assert.Contains(t, lines[1], "subscription")
	assert.Equal(t, "model classes: cheap->haiku, standard->(backend default), frontier->opus", lines[2])
	assert.Equal(t, "model switch: per turn (guide agentModel)", lines[3])
	assert.Contains(t, lines, "task: bounded edit (rename, docs, config, one-file fix): cheap (haiku) @ low; downshift: the cheap class is enough")
	assert.Contains(t, lines, "task: bug fix with a failing test: standard (backend default) @ default effort; the default")
	none := GuidanceLines(messages.Descriptor{ID: "x", Cost: messages.CostMetered})
	assert.Equal(t, "effort: not supported: an explicit effort is rejected", none[0])
	assert.Contains(t, none[1], "dollar")
}
