package actors

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/codesession/codesession/actors/store/filestore"
	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports/codex"
)

// Pruned is one session Prune removed (or, in a dry run, would remove).
type Pruned struct {
	SessionID string             `json:"sessionId"`
	Status    messages.Status    `json:"status"`
	UpdatedAt time.Time          `json:"updatedAt"`
	Worktree  *messages.Worktree `json:"worktree,omitempty"`
	// CodexHome is the session's own CODEX_HOME folder (a codex session's
	// threads, kept for resume), when it had one.
	CodexHome string `json:"codexHome,omitempty"`
}

// Prune removes from home every session that is no longer live (ended,
// failed or orphaned) and was last updated before cutoff: its record, its
// event log, its worktree (the worktree's branch stays, holding the
// work until it is merged or deleted) and a codex session's own CODEX_HOME
// under codex.DefaultHomeRoot (kept until then for resume). Outcomes and lessons stay: they
// are the learning loop's. Prune refuses while a runtime (a daemon, a
// `run`) holds a lease on home, since the store may not be shared. With
// dryRun it only lists what it would remove.
func Prune(ctx context.Context, home string, cutoff time.Time, dryRun bool) ([]Pruned, error) {
	const op = "prune"
	locks, _ := filepath.Glob(filepath.Join(home, runtimesDir, "*.lock"))
	for _, l := range locks {
		if id := strings.TrimSuffix(filepath.Base(l), ".lock"); leaseHeld(home, id) {
			return nil, messages.Errorf(messages.CodeConflict, op, "a codesession process (runtime %s) is using %s: stop it (the daemon, or a run) and prune again", id, home)
		}
	}
	st, err := filestore.Open(home) // replays the write-ahead log, so the records are current
	if err != nil {
		return nil, messages.Wrap(messages.CodeInternal, op, err, "cannot open the session store: "+err.Error())
	}
	recs, err := st.List(ctx)
	if cerr := st.Close(); err == nil && cerr != nil { // checkpoints: nothing of these sessions stays in the log
		err = cerr
	}
	if err != nil {
		return nil, messages.AsError(op, err)
	}
	var out []Pruned
	for _, rec := range recs {
		if rec.Status.Live() || !rec.UpdatedAt.Before(cutoff) {
			continue
		}
		p := Pruned{SessionID: rec.SessionID, Status: rec.Status, UpdatedAt: rec.UpdatedAt, Worktree: rec.Worktree}
		if messages.ValidSessionID(rec.SessionID) {
			if dir := filepath.Join(codex.DefaultHomeRoot(), rec.SessionID); dirExists(dir) {
				p.CodexHome = dir
			}
		}
		out = append(out, p)
		if dryRun {
			continue
		}
		if err := RemoveWorktree(ctx, rec.Worktree); err != nil {
			return out, messages.Wrap(messages.CodeInternal, op, err, fmt.Sprintf("cannot remove the worktree of %s: %v", rec.SessionID, err))
		}
		if !messages.ValidSessionID(rec.SessionID) {
			continue // never a path from a malformed id
		}
		if err := os.RemoveAll(filepath.Join(home, "sessions", rec.SessionID)); err != nil {
			return out, messages.Wrap(messages.CodeInternal, op, err, fmt.Sprintf("cannot remove the record of %s: %v", rec.SessionID, err))
		}
		if p.CodexHome != "" {
			if err := os.RemoveAll(p.CodexHome); err != nil {
				return out, messages.Wrap(messages.CodeInternal, op, err, fmt.Sprintf("cannot remove the CODEX_HOME of %s: %v", rec.SessionID, err))
			}
		}
	}
	return out, nil
}

func dirExists(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.IsDir()
}
