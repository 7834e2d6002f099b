package transports

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// OverlayHome links the user's dot-directory entries the plan lacks, keeps
// the plan's own, makes the sessions directory in the user's home, and is
// idempotent.
func TestOverlayHome(t *testing.T) {
	user, home := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(user, ".factory"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(user, ".factory", "settings.json"), []byte("{}"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(user, ".factory", "mcp.json"), []byte("user's"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".factory"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".factory", "mcp.json"), []byte("plan's"), 0o600))
	for range 2 {
		require.NoError(t, OverlayHome(home, user, ".factory"))
	}
	link, err := os.Readlink(filepath.Join(home, ".factory", "settings.json"))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(user, ".factory", "settings.json"), link)
	b, err := os.ReadFile(filepath.Join(home, ".factory", "mcp.json"))
	require.NoError(t, err)
	require.Equal(t, "plan's", string(b), "the plan's own file wins")
	require.DirExists(t, filepath.Join(user, ".factory", "sessions"))
	link, err = os.Readlink(filepath.Join(home, ".factory", "sessions"))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(user, ".factory", "sessions"), link, "sessions stay in the user's home")
}
