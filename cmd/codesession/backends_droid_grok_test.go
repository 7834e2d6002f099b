package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
)

// TestBackendsListDroidAndGrok: both backends are in the default registry,
// and grok says everywhere that it is replay-tested, never tested live.
func TestBackendsListDroidAndGrok(t *testing.T) {
	t.Parallel()
	res := runCLI(t, invocation{}, "backends", "--json")
	require.Equal(t, exitOK, res.code, res.stderr)
	var list messages.ListBackendsResult
	require.NoError(t, json.NewDecoder(strings.NewReader(res.stdout)).Decode(&list))
	got := map[string]messages.Descriptor{}
	for _, b := range list.Backends {
		got[b.Descriptor.ID] = b.Descriptor
	}
	require.Contains(t, got, "droid")
	require.Contains(t, got, "grok")
	assert.Equal(t, "auto", got["grok"].PostureMap[messages.PostureAcceptEdits], "the naming trap")
	assert.Contains(t, got["grok"].DisplayName, "replay-tested")
	assert.Contains(t, got["grok"].BriefingNotes, "NOT TESTED LIVE")
	assert.Contains(t, got["droid"].BriefingNotes, "risk level the model itself declares")

	res = runCLI(t, invocation{}, "backends")
	require.Equal(t, exitOK, res.code, res.stderr)
	assert.Regexp(t, `(?m)^grok\s+xAI Grok Build \(replay-tested\)\s`, res.stdout)
	assert.Regexp(t, `(?m)^droid\s+Factory Droid\s`, res.stdout)
	assert.Contains(t, res.stdout, "droid: plan=off+refuse-all default=off+ask acceptEdits=off+gated-edits-approved full=high")
	assert.Contains(t, res.stdout, "grok: plan=plan default=default acceptEdits=auto full=bypassPermissions")
}
