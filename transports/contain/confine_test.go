package contain_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/contain"
)

// stateful is a process backend that declares a state folder and keeps
// the spec it was opened with.
type stateful struct {
	fake
	listsHome bool
	opened    transports.SessionSpec
}

func (s *stateful) Descriptor() transports.Descriptor {
	return transports.Descriptor{ID: "stateful", Containment: &messages.Containment{StateDirs: []string{"~/.state"}, ListsHome: s.listsHome}}
}

func (s *stateful) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	s.opened = spec
	return s.fake.Open(ctx, spec, sink)
}

// TestSessionConfinement: every session of a process backend is opened
// with the runtime's confinement (workspace, own HOME, the declared state
// folder made in it, a private TMPDIR per process, the credential
// folders of both HOMEs denied) and the descriptor reports it.
func TestSessionConfinement(t *testing.T) {
	b := &stateful{}
	tr := contain.Wrap(b, contain.Options{ReadDenied: []string{"/daemon/token"}})
	ws, home := t.TempDir(), t.TempDir()
	_, err := tr.Open(context.Background(), transports.SessionSpec{Cwd: ws, Home: home}, func(int, messages.Event) {})
	require.NoError(t, err)
	c := b.opened.Confine
	require.NotNil(t, c, "a process backend's session is confined")
	assert.True(t, c.OwnTmp)
	assert.Equal(t, []string{ws, home, filepath.Join(home, ".state")}, c.WritableDirs)
	assert.DirExists(t, filepath.Join(home, ".state"), "made before the start: Landlock rules hold on what exists")
	assert.Contains(t, c.ReadDenied, filepath.Join(home, ".ssh"))
	assert.Contains(t, c.ReadDenied, "/daemon/token")
	if d, _ := os.UserHomeDir(); d != "" {
		assert.Contains(t, c.ReadDenied, filepath.Join(d, ".ssh"), "the daemon user's credentials too")
	}
	cont := tr.Descriptor().Containment
	assert.Equal(t, []string{"~/.state"}, cont.StateDirs)
	assert.NotEmpty(t, cont.Filesystem)
	assert.Equal(t, "open: no network confinement", cont.Network)

	lister := &stateful{listsHome: true}
	_, err = contain.Wrap(lister, contain.Options{}).Open(context.Background(), transports.SessionSpec{Cwd: ws, Home: home}, func(int, messages.Event) {})
	require.NoError(t, err)
	assert.Empty(t, lister.opened.Confine.ReadDenied, "a CLI that lists HOME keeps its reads")

	off := &stateful{}
	_, err = contain.Wrap(off, contain.Options{Unconfined: true}).Open(context.Background(), transports.SessionSpec{Cwd: ws}, func(int, messages.Event) {})
	require.NoError(t, err)
	assert.Nil(t, off.opened.Confine)
}
