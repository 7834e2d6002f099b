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

// Narrow holds a merged policy to the caller's scope: an explicit ceiling
// above it is refused, an omitted one clamped; a pin outside its backends
// is refused, its one backend pins; rounds and tools only narrow.
func TestNarrowToTheCallersScope(t *testing.T) {
	p := Persona{Name: "x", Driver: true, MaxPosture: messages.PostureAcceptEdits, InitialPosture: messages.PostureAcceptEdits, MaxRounds: 10}
	w := Within{Constraints: messages.ScopeConstraints{MaxPosture: messages.PostureDefault, MaxRounds: 4, AllowedTools: []string{"Read", "Bash"}},
		Backends: []string{"script"}}
	merged := func(o Overrides) Policy {
		pol, err := Merge(p, o, "")
		require.NoError(t, err)
		return pol
	}
	o := Overrides{}
	pol, err := Narrow(merged(o), o, w)
	require.NoError(t, err)
	assert.Equal(t, messages.PostureDefault, pol.Constraints.MaxPosture, "clamped")
	assert.Equal(t, messages.PostureDefault, pol.InitialPosture)
	assert.Equal(t, "script", pol.Constraints.Backend)
	assert.Equal(t, 4, pol.Constraints.MaxRounds)
	assert.Equal(t, []string{"Read", "Bash"}, pol.Constraints.AllowedTools)

	o = Overrides{MaxPosture: messages.PostureAcceptEdits}
	_, err = Narrow(merged(o), o, w)
	assert.True(t, messages.IsCode(err, messages.CodeCeilingExceeded), "%v", err)
	o = Overrides{Backend: "native"}
	_, err = Narrow(merged(o), o, w)
	assert.True(t, messages.IsCode(err, messages.CodeInvalid), "%v", err)
	o = Overrides{AllowedTools: []string{"Bash", "Edit"}}
	pol, err = Narrow(merged(o), o, w)
	require.NoError(t, err)
	assert.Equal(t, []string{"Bash"}, pol.Constraints.AllowedTools, "within the scope's tools")
	o = Overrides{AllowedTools: []string{"Edit"}}
	_, err = Narrow(merged(o), o, w)
	assert.True(t, messages.IsCode(err, messages.CodeInvalid), "%v", err)
}
