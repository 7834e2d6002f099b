package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

func TestMergeIsNarrowOnly(t *testing.T) {
	p := Persona{Driver: true, MaxPosture: messages.PostureAcceptEdits, InitialPosture: messages.PostureDefault, MaxRounds: 20}
	pol, err := Merge(p, Overrides{}, messages.PostureFull)
	require.NoError(t, err)
	assert.Equal(t, messages.ScopeConstraints{MaxPosture: messages.PostureAcceptEdits, MaxRounds: 20}, pol.Constraints)
	assert.Equal(t, messages.PostureDefault, pol.InitialPosture)

	pol, err = Merge(p, Overrides{MaxPosture: messages.PosturePlan, MaxRounds: 5, AllowedTools: []string{"read"}}, messages.PostureFull)
	require.NoError(t, err)
	assert.Equal(t, messages.PosturePlan, pol.Constraints.MaxPosture, "narrowed")
	assert.Equal(t, 5, pol.Constraints.MaxRounds)
	assert.Equal(t, []string{"read"}, pol.Constraints.AllowedTools)
	assert.Equal(t, messages.PosturePlan, pol.InitialPosture, "the initial posture is clamped to the ceiling")

	pol, err = Merge(p, Overrides{MaxRounds: 50}, messages.PostureFull)
	require.NoError(t, err)
	assert.Equal(t, 20, pol.Constraints.MaxRounds, "a bigger budget does not widen")

	_, err = Merge(p, Overrides{MaxPosture: messages.PostureFull}, messages.PostureFull)
	assert.True(t, messages.IsCode(err, messages.CodeCeilingExceeded), "an override above the persona's ceiling is refused: %v", err)

	pol, err = Merge(Persona{Driver: true}, Overrides{}, messages.PostureDefault)
	require.NoError(t, err)
	assert.Equal(t, messages.PostureDefault, pol.Constraints.MaxPosture, "no persona ceiling: the runtime's")
}

func TestMergeBackendPins(t *testing.T) {
	pol, err := Merge(Persona{Driver: true}, Overrides{Supervised: true}, "")
	require.NoError(t, err)
	assert.Equal(t, SupervisedBackend, pol.Constraints.Backend, "--supervised pins native")

	pol, err = Merge(Persona{Driver: true, Backend: "claude-code"}, Overrides{Backend: "claude-code"}, "")
	require.NoError(t, err)
	assert.Equal(t, "claude-code", pol.Constraints.Backend)

	_, err = Merge(Persona{Driver: true, Backend: "claude-code"}, Overrides{Supervised: true}, "")
	assert.True(t, messages.IsCode(err, messages.CodeInvalid), "%v", err)
	_, err = Merge(Persona{Driver: true, Backend: "claude-code"}, Overrides{Backend: "codex"}, "")
	assert.True(t, messages.IsCode(err, messages.CodeInvalid), "%v", err)
}
