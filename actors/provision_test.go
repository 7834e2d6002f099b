package actors

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/actors/curation"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/acp"
	"github.com/codesession/codesession/transports/opencode"
	"github.com/codesession/codesession/transports/script"
)

// asBackend is the script backend under another backend's id, recording
// the spec each Open got: what a real backend would read of the plan.
type asBackend struct {
	transports.Transport
	id    string
	specs chan transports.SessionSpec
}

func (a asBackend) Descriptor() transports.Descriptor {
	d := a.Transport.Descriptor()
	d.ID = a.id
	return d
}

func (a asBackend) Open(ctx context.Context, spec transports.SessionSpec, sink transports.Sink) (transports.Session, error) {
	a.specs <- spec
	return a.Transport.Open(ctx, spec, sink)
}

func curationRuntime(t *testing.T) (*Runtime, chan transports.SessionSpec) {
	cfg := testConfig(t)
	cfg.DefaultBackend = "claude-code"
	sc := &script.Scenario{Turns: []script.Turn{{Steps: []script.Step{script.Text("ok")}}, {Steps: []script.Step{script.Text("ok")}}}}
	specs := make(chan transports.SessionSpec, 16)
	be := asBackend{Transport: script.New(script.WithScenario(sc)), id: "claude-code", specs: specs}
	cur := &curation.Curator{Home: cfg.Home} // no skill fetcher: nothing reaches out
	rt, err := New(cfg, WithBackends(transports.NewRegistry(be)), WithCurator(cur))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // only stops a hang
		defer cancel()
		_ = rt.Close(ctx)
	})
	return rt, specs
}

func project(t *testing.T, files map[string]string) string {
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
	}
	return dir
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // only stops a hang
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCurationProvisionsASupabaseProjectAndCleansUp(t *testing.T) {
	rt, specs := curationRuntime(t)
	ctx := ctxT(t)
	repo := project(t, map[string]string{"supabase/config.toml": "project_id = \"x\"\n"})
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "fix the query", Cwd: repo})
	require.NoError(t, err)
	spec := <-specs
	require.NotNil(t, spec.Provision, "the transport gets the plan")
	require.FileExists(t, spec.Provision.ConfigFile)
	require.Contains(t, spec.AppendSystemPrompt, "supabase MCP server is read-only")
	require.Contains(t, spec.PassEnv, "SUPABASE_ACCESS_TOKEN")

	rec, err := rt.Store().GetMeta(ctx, st.SessionID)
	require.NoError(t, err)
	require.NotNil(t, rec.Provision)
	require.Equal(t, []string{"supabase"}, rec.Provision.CapabilityIDs)
	require.Equal(t, []string{"supabase"}, rec.Provision.Applied)
	require.Equal(t, "T2R", rec.Provision.Tiers["supabase"])
	require.Len(t, rec.Provision.TokenScopeNotes, 1)

	m, ok := rt.Manifest(st.SessionID)
	require.True(t, ok)
	require.Equal(t, "fix the query", m.Brief)
	require.Equal(t, "claude-code", m.Backend)
	require.Len(t, m.Files, len(spec.Provision.Files))
	// nothing was written into the repository
	ents, err := os.ReadDir(repo)
	require.NoError(t, err)
	require.Len(t, ents, 1)

	_, err = rt.Stop(ctx, "s", messages.Stop{SessionID: st.SessionID})
	require.NoError(t, err)
	dir := curation.ProvisionDir(rt.cfg.Home, st.SessionID)
	waitFor(t, "the provision dir to be cleaned", func() bool {
		ents, _ := os.ReadDir(dir)
		return len(ents) == 1 && ents[0].Name() == curation.ManifestFile
	})
	_, ok = rt.Manifest(st.SessionID)
	require.True(t, ok, "the manifest outlives the release")
}

func TestCurationPlainProjectGetsNothing(t *testing.T) {
	rt, specs := curationRuntime(t)
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "b", Cwd: project(t, map[string]string{"README.md": "hi"})})
	require.NoError(t, err)
	spec := <-specs
	require.Nil(t, spec.Provision)
	rec, err := rt.Store().GetMeta(ctx, st.SessionID)
	require.NoError(t, err)
	require.NotNil(t, rec.Provision)
	require.Empty(t, rec.Provision.CapabilityIDs)
	require.Empty(t, rec.Provision.Applied)
}

func TestCurationApprovalPickedUpByTheNextSession(t *testing.T) {
	rt, specs := curationRuntime(t)
	ctx := ctxT(t)
	repo := project(t, map[string]string{"playwright.config.ts": "export default {}\n"})
	first, err := rt.Start(ctx, "s", messages.Start{Brief: "b", Cwd: repo})
	require.NoError(t, err, "an unapproved capability never blocks the start")
	require.Nil(t, (<-specs).Provision)
	rec, err := rt.Store().GetMeta(ctx, first.SessionID)
	require.NoError(t, err)
	require.Equal(t, []string{"playwright"}, rec.Provision.AwaitingApproval)
	require.Empty(t, rec.Provision.Applied)

	list, err := rt.Approvals()
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, messages.ApprovalPending, list[0].Status)
	require.Equal(t, []string{first.SessionID}, list[0].Sessions)
	_, err = rt.DecideApproval(messages.ApprovalDecision{ID: list[0].ID, Decision: "approve"})
	require.NoError(t, err)

	second, err := rt.Start(ctx, "s", messages.Start{Brief: "b", Cwd: repo})
	require.NoError(t, err)
	spec := <-specs
	require.NotNil(t, spec.Provision)
	require.Len(t, spec.Provision.MCPServers, 1)
	require.Equal(t, "playwright", spec.Provision.MCPServers[0].Name)
	rec, err = rt.Store().GetMeta(ctx, second.SessionID)
	require.NoError(t, err)
	require.Equal(t, []string{"playwright"}, rec.Provision.Applied)
	require.Empty(t, rec.Provision.AwaitingApproval)
}

func TestCurationRefusedStartLeavesNothing(t *testing.T) {
	rt, _ := curationRuntime(t)
	ctx := ctxT(t)
	repo := project(t, map[string]string{"supabase/config.toml": "x"})
	_, err := rt.Start(ctx, "s", messages.Start{Brief: "b", Cwd: repo, MaxPosture: messages.PosturePlan, InitialPosture: messages.PostureFull})
	require.Error(t, err)
	ents, err := os.ReadDir(filepath.Join(rt.cfg.Home, "sessions"))
	require.NoError(t, err)
	require.Empty(t, ents, "a refused start leaves no provision directory")
}

func TestCurationOff(t *testing.T) {
	cfg := testConfig(t)
	rt := newRuntime(t, cfg, &script.Scenario{Turns: []script.Turn{{Steps: []script.Step{script.Text("ok")}}}}, WithoutCuration())
	ctx := ctxT(t)
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "b", Cwd: project(t, map[string]string{"supabase/config.toml": "x"})})
	require.NoError(t, err)
	rec, err := rt.Store().GetMeta(ctx, st.SessionID)
	require.NoError(t, err)
	require.Nil(t, rec.Provision)
	_, ok := rt.Manifest(st.SessionID)
	require.False(t, ok)
}

func TestCurationResumedRunIsProvisionedAgain(t *testing.T) {
	rt, specs := curationRuntime(t)
	ctx := ctxT(t)
	repo := project(t, map[string]string{"supabase/config.toml": "x"})
	st, err := rt.Start(ctx, "s", messages.Start{Brief: "b", Cwd: repo})
	require.NoError(t, err)
	<-specs
	_, err = rt.Stop(ctx, "s", messages.Stop{SessionID: st.SessionID})
	require.NoError(t, err)
	_, err = rt.Resume(ctx, "s", messages.Resume{SessionID: st.SessionID})
	require.NoError(t, err)
	spec := <-specs
	require.NotNil(t, spec.Provision, "the resumed run gets the project's capabilities")
	require.FileExists(t, spec.Provision.ConfigFile, "written after the release's cleanup")
	rec, err := rt.Store().GetMeta(ctx, st.SessionID)
	require.NoError(t, err)
	require.Equal(t, []string{"supabase"}, rec.Provision.Applied)
}

// TestManifestArgvOfAnACPAgentIsKnownBeforeItsProcess: an ACP agent's
// launch manifest records its argv from the transport (acp LaunchArgv),
// not from a process record that may not be written yet. Here there is no
// process record at all, so the old code (process record only) wrote no
// argv.
func TestManifestArgvOfAnACPAgentIsKnownBeforeItsProcess(t *testing.T) {
	cfg := testConfig(t)
	bin := filepath.Join(t.TempDir(), "opencode")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\nexit 3\n"), 0o755))
	cur := &curation.Curator{Home: cfg.Home}
	rt, err := New(cfg, WithBackends(transports.NewRegistry(script.New(), opencode.New(acp.WithBinary(bin)))), WithCurator(cur))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // only stops a hang
		defer cancel()
		_ = rt.Close(ctx)
	})
	ctx := ctxT(t)
	cwd := t.TempDir()
	sid := messages.NewSessionID()
	now := time.Now()
	require.NoError(t, rt.Store().Create(ctx, messages.SessionRecord{SessionID: sid, BackendID: opencode.ID, Cwd: cwd,
		Status: messages.StatusIdle, Posture: messages.PostureDefault, CreatedAt: now, UpdatedAt: now}))
	rt.writeManifest(ctx, sid, messages.Start{Brief: "b", Cwd: cwd, Backend: opencode.ID}, curation.Result{})
	m, ok := rt.Manifest(sid)
	require.True(t, ok)
	require.Equal(t, []string{bin, "acp", "--cwd", cwd}, m.Argv)
}
