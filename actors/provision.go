package actors

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/codesession/codesession/actors/curation"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
	"github.com/codesession/codesession/transports/proc"
)

// WithCurator sets the capability curator (seed 000 §9); the default is
// curation.NewCurator over the home (skills from GitHub, cached).
func WithCurator(c *curation.Curator) Option { return func(o *options) { o.curator = c } }

// WithoutCuration turns capability curation off: no detection, nothing
// provisioned, no launch manifest.
func WithoutCuration() Option { return func(o *options) { o.noCuration = true } }

// Launcher is a transport that can say the argv it would start a session
// with (the launch manifest records it); optional.
type Launcher interface {
	LaunchArgv(spec transports.SessionSpec) []string
}

// curate runs the curation pipeline for a start about to be sent to the
// registry (the backend the start names, else the default; the registry
// drops the plan if the scope pins another).
func (r *Runtime) curate(ctx context.Context, sid string, op messages.Start) curation.Result {
	if r.curator == nil {
		return curation.Result{}
	}
	backend := cmp.Or(op.Backend, r.cfg.DefaultBackend)
	res := r.curator.Resolve(ctx, curation.Request{SessionID: sid, Cwd: op.Cwd, Backend: backend})
	if res.Meta != nil {
		res.Meta.Manifest = filepath.Join(res.Dir, curation.ManifestFile)
		if len(res.Meta.CapabilityIDs) > 0 {
			r.log.Info("curation: capabilities", "session", sid, "detected", res.Meta.CapabilityIDs,
				"applied", res.Meta.Applied, "awaitingApproval", res.Meta.AwaitingApproval, "ignored", res.Meta.Ignored)
		}
	}
	return res
}

// curateResume is curation for a resumed run: the project's capabilities
// as of now, for the record's backend.
func (r *Runtime) curateResume(ctx context.Context, sid, cwd, backend string) curation.Result {
	res := r.curator.Resolve(ctx, curation.Request{SessionID: sid, Cwd: cwd, Backend: backend})
	if res.Meta != nil {
		res.Meta.Manifest = filepath.Join(res.Dir, curation.ManifestFile)
	}
	return res
}

// unprovision removes what a start provisioned, when the start was
// refused: the plan's files, and the session directory when the store has
// no record of the session (asked of the store, not of meta.json: the
// file store writes meta.json at checkpoints, its write-ahead log holds a
// new record until then).
func (r *Runtime) unprovision(ctx context.Context, sid string, res curation.Result) {
	if res.Dir == "" {
		return
	}
	_ = os.RemoveAll(res.Dir)
	sdir := filepath.Dir(res.Dir)
	if _, err := r.store.GetMeta(ctx, sid); messages.IsCode(err, messages.CodeNotFound) {
		_ = os.Remove(sdir) // only when empty
	}
}

// writeManifest writes the session's launch manifest once its record is
// durable: what it ran from, with the sha256 of every provisioned file.
func (r *Runtime) writeManifest(ctx context.Context, sid string, op messages.Start, res curation.Result) {
	if r.curator == nil || r.cfg.Home == "" {
		return
	}
	rec, err := r.store.GetMeta(ctx, sid)
	if err != nil {
		r.log.Warn("curation: no record to write the launch manifest from", "session", sid, "err", err)
		return
	}
	m := curation.Manifest{SessionID: sid, CreatedAt: rec.CreatedAt, Cwd: rec.Cwd, Brief: op.Brief,
		Backend: rec.BackendID, Posture: rec.Posture, MaxPosture: rec.MaxPosture, Provision: rec.Provision,
		Policy: curation.ManifestPolicy{MaxRounds: rec.MaxRounds, AllowedTools: rec.AllowedTools, Isolate: string(op.Isolate), OwnerScope: ownerOf(rec)}}
	if op.AppendSystemPrompt != "" {
		m.SystemPrompt = curation.SHA256Hex([]byte(op.AppendSystemPrompt))
	}
	var files []string
	if t, err := r.backends.Get(rec.BackendID); err == nil {
		m.CLIVersion = t.Descriptor().CLIVersion
		spec := transports.SessionSpec{SessionID: sid, Cwd: rec.Cwd, Model: rec.Model, Effort: rec.Effort, Posture: rec.Posture,
			AllowedTools: rec.AllowedTools, AppendSystemPrompt: op.AppendSystemPrompt}
		if rec.BackendID == cmp.Or(op.Backend, r.cfg.DefaultBackend) {
			spec.Provision = res.Plan
		}
		if l, ok := launcherOf(t); ok {
			m.Argv = l.LaunchArgv(spec.WithProvision())
		}
	}
	if m.Argv == nil {
		// a backend that is no Launcher (grok; claude-code, droid, codex
		// and the ACP agents are): the argv its process started with, from
		// the session's process record (proc.Kit), when it is there by now;
		// a backend without a process of its own (native, script) has none
		m.Argv = recordedArgv(r.cfg.Home, sid)
	}
	if res.Plan != nil {
		files = slices.Clone(res.Plan.Files)
	}
	if _, err := curation.WriteManifest(curation.ProvisionDir(r.cfg.Home, sid), m, files); err != nil {
		r.log.Warn("curation: launch manifest not written", "session", sid, "err", err)
	}
}

// launcherOf finds the Launcher under the runtime's wrappers (containment).
func launcherOf(t transports.Transport) (Launcher, bool) {
	for range 8 {
		if l, ok := t.(Launcher); ok {
			return l, true
		}
		u, ok := t.(interface{ Unwrap() transports.Transport })
		if !ok {
			return nil, false
		}
		t = u.Unwrap()
	}
	return nil, false
}

// recordedArgv is the argv of session sid's process as its process record
// under <home>/run/procs says (nil when it has none: no process, a warm
// process not yet recorded under the session, no kit).
func recordedArgv(home, sid string) []string {
	dir := filepath.Join(home, "run", "procs")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || len(b) > 1<<20 {
			continue
		}
		var rec proc.Record
		if json.Unmarshal(b, &rec) == nil && rec.SessionID == sid && len(rec.Argv) > 0 {
			return rec.Argv
		}
	}
	return nil
}

func ownerOf(rec messages.SessionRecord) string {
	if run := rec.LatestRun(); run != nil {
		return run.OwnerScopeID
	}
	return ""
}

// Manifest reads a session's launch manifest (ok false when it has none).
func (r *Runtime) Manifest(sid string) (curation.Manifest, bool) {
	if r.cfg.Home == "" || !messages.ValidSessionID(sid) {
		return curation.Manifest{}, false
	}
	m, err := curation.ReadManifest(curation.ProvisionDir(r.cfg.Home, sid))
	return m, err == nil
}

// Approvals lists the capability approvals of the runtime's home.
func (r *Runtime) Approvals() ([]messages.Approval, error) {
	if r.cfg.Home == "" {
		return nil, messages.Errorf(messages.CodeUnavailable, "approvals", "this runtime has no home")
	}
	return curation.NewLedger(r.cfg.Home, nil).List()
}

// DecideApproval records the owner's decision on a capability approval; a
// later session in the project picks an approved capability up.
func (r *Runtime) DecideApproval(d messages.ApprovalDecision) (messages.Approval, error) {
	if r.cfg.Home == "" {
		return messages.Approval{}, messages.Errorf(messages.CodeUnavailable, "approvals", "this runtime has no home")
	}
	return curation.NewLedger(r.cfg.Home, nil).Decide(d)
}

// releaseProvision removes a released session's provisioned files (the
// manifest stays). It runs in line, on the registry's goroutine: a handful
// of small files (well under a millisecond), and in order with a resume of
// the same session, whose new plan is written after it.
func releaseProvision(home, sid string) {
	if home == "" {
		return
	}
	_ = curation.Cleanup(curation.ProvisionDir(home, sid))
}
