package actors

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/config"
	"github.com/codesession/codesession/messages"
)

// maxCostUsd is a budget like maxRounds: the scope's clamps a start's (and
// an omitted one), never rejects it; a resume is clamped with a warning.
func TestResolveBudget(t *testing.T) {
	cfg := config.Default()
	cfg.DefaultBackend = "gated"
	for _, c := range []struct {
		name      string
		asked, in float64
		want      float64
	}{
		{"no budget anywhere", 0, 0, 0},
		{"the start's own", 2, 0, 2},
		{"clamped to the scope's", 5, 1.5, 1.5},
		{"below the scope's kept", 1, 1.5, 1},
		{"omitted takes the scope's", 0, 3, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec, _, err := resolveStart(messages.Start{Brief: "x", MaxCostUSD: c.asked}, messages.ScopeConstraints{MaxCostUSD: c.in}, &cfg, ruleBackends())
			require.NoError(t, err)
			assert.InDelta(t, c.want, spec.MaxCostUSD, 1e-9)
		})
	}
	d, _ := ruleBackends().Get("gated")
	rec := messages.SessionRecord{BackendID: "gated", MaxPosture: messages.PostureDefault, Posture: messages.PostureDefault, MaxCostUSD: 4}
	l, err := resolveResume(rec, "", messages.ScopeConstraints{MaxCostUSD: 1}, &cfg, d.Descriptor())
	require.NoError(t, err)
	assert.InDelta(t, 1, l.maxCost, 1e-9)
	require.Len(t, l.warnings, 1)
	assert.Contains(t, l.warnings[0], "maxCostUsd 4 is above this scope's budget 1")
}
