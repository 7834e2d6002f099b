// Package droidtest is what droid's live tests share across packages
// (droid's own, the runtime's, curation's): the bring-your-own-key
// settings that point a real droid at a modelmock server, and the ids droid
// derives for their models. It imports nothing of droid, so droid's
// internal tests use it too.
package droidtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The custom models Settings configures, by the ids droid derives from
// their display names and places: mock-model first, mock-model-two second.
const (
	MockModelID   = "custom:Loopback-Mock-(chat)-0"
	SecondModelID = "custom:Loopback-Mock-(two)-1"
)

// WriteSettings points droid in home at the mock at mockURL: one
// bring-your-own-key Chat Completions model (MockModelID) and, with two,
// a second (SecondModelID: same mock, another model name, so a turn's
// text tells which one ran). No Factory login is needed.
func WriteSettings(t testing.TB, home, mockURL string, two bool) {
	t.Helper()
	model := func(name, display string) map[string]any {
		return map[string]any{"model": name, "displayName": display, "baseUrl": mockURL + "/v1",
			"apiKey": "sk-mock", "provider": "generic-chat-completion-api", "maxOutputTokens": 8192}
	}
	models := []map[string]any{model("mock-model", "Loopback Mock (chat)")}
	if two {
		models = append(models, model("mock-model-two", "Loopback Mock (two)"))
	}
	b, err := json.Marshal(map[string]any{"customModels": models})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".factory"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".factory", "settings.json"), b, 0o600))
}

// Home is a fresh HOME with WriteSettings' one model.
func Home(t testing.TB, mockURL string) string {
	t.Helper()
	home := t.TempDir()
	WriteSettings(t, home, mockURL, false)
	return home
}
