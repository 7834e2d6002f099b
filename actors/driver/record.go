package driver

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/codesession/codesession/messages"
)

// State is where a delegation is.
//
//	running --(the driver's loop ended)--> done | failed | cancelled
//	running --(its process died; seen at the next boot)--> killed
type State string

const (
	StateRunning   State = "running"
	StateDone      State = "done"      // the driver ended its turn
	StateFailed    State = "failed"    // the driver's loop failed (its model, a tool)
	StateCancelled State = "cancelled" // cancelled by its caller or the runtime's close
	StateKilled    State = "killed"    // its process died while it ran
)

// Live reports whether the delegation is still running.
func (s State) Live() bool { return s == StateRunning }

// Bounds of what a record keeps.
const (
	maxRecordBrief  = 2048
	maxRecordReport = 4096
)

// Record is a delegation: who drove what, under which constraints, and
// how it settled. It is kept as <home>/delegations/<id>.json beside the
// session store's records; the sessions it drove are ordinary session
// records whose runs name its Scope.
type Record struct {
	ID      string `json:"id"`
	Agent   string `json:"agent"`
	Source  string `json:"source,omitempty"`
	Brief   string `json:"brief"`
	Scope   string `json:"scope"`
	Runtime string `json:"runtime,omitempty"`
	// Owner is the ownership scope that dispatched it (a control-plane
	// token's; "" for an embedder's or an older record).
	Owner       string                    `json:"owner,omitempty"`
	Supervised  bool                      `json:"supervised,omitempty"`
	Constraints messages.ScopeConstraints `json:"constraints"`
	// ResumeOf is the session record this delegation was dispatched to
	// resume (it adopts it).
	ResumeOf string `json:"resumeOf,omitempty"`
	State    State  `json:"state"`
	// Sessions are the ids of the sessions it drove, in start order.
	Sessions []string `json:"sessions"`
	// Verdicts are the driver's stop verdicts, by session.
	Verdicts map[string]messages.Outcome `json:"verdicts,omitempty"`
	// Question is the driven session's clarification waiting for a human.
	Question *Question `json:"question,omitempty"`
	Report   string    `json:"report,omitempty"`
	Error    string    `json:"error,omitempty"`
	// Rounds are the driver's own model rounds.
	Rounds    int       `json:"rounds"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	EndedAt   time.Time `json:"endedAt,omitzero"`
}

// Question is a clarification of a driven session handed to the human.
type Question struct {
	SessionID       string          `json:"sessionId"`
	ClarificationID string          `json:"clarificationId"`
	ToolName        string          `json:"toolName"`
	Input           json.RawMessage `json:"input,omitempty"`
	At              time.Time       `json:"at"`
}

var idRE = regexp.MustCompile(`^dl_[0-9a-f]{24}$`)

// ValidID reports whether id is a delegation id.
func ValidID(id string) bool { return idRE.MatchString(id) }

// ScopePrefix starts every delegation's ownership scope.
const ScopePrefix = "delegation:"

// ScopeOf is delegation id's ownership scope.
func ScopeOf(id string) string { return ScopePrefix + id }

// IDOfScope is the delegation a scope belongs to, if it is one's.
func IDOfScope(scope string) (string, bool) {
	id, ok := strings.CutPrefix(scope, ScopePrefix)
	return id, ok && ValidID(id)
}

// Records keeps delegation records in one directory, one atomic JSON file
// each. It is safe for concurrent use within a process.
type Records struct {
	dir string
	mu  sync.Mutex
}

// OpenRecords keeps records under <home>/delegations (made with the
// first record: a home that never delegated has none).
func OpenRecords(home string) (*Records, error) {
	if home == "" {
		return nil, errors.New("delegation records need a home")
	}
	return &Records{dir: filepath.Join(home, "delegations")}, nil
}

func (rs *Records) path(id string) string { return filepath.Join(rs.dir, id+".json") }

// Put writes rec atomically (temp file, fsync, rename).
func (rs *Records) Put(rec Record) error {
	if !ValidID(rec.ID) {
		return fmt.Errorf("delegation id %q", rec.ID)
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if err := os.MkdirAll(rs.dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(rs.dir, "."+rec.ID+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), rs.path(rec.ID))
}

// Update reads rec id, applies f and writes it back, under the lock.
func (rs *Records) Update(id string, f func(*Record)) (Record, error) {
	rs.mu.Lock()
	rec, err := rs.get(id)
	rs.mu.Unlock()
	if err != nil {
		return rec, err
	}
	f(&rec)
	return rec, rs.Put(rec)
}

// Get reads one record; not_found when there is none.
func (rs *Records) Get(id string) (Record, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.get(id)
}

func (rs *Records) get(id string) (Record, error) {
	var rec Record
	if !ValidID(id) {
		return rec, messages.Errorf(messages.CodeNotFound, "delegation", "no delegation %q", id)
	}
	b, err := os.ReadFile(rs.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return rec, messages.Errorf(messages.CodeNotFound, "delegation", "no delegation %s", id)
	}
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, messages.Wrap(messages.CodeInternal, "delegation", err, "delegation record "+id+" is corrupt")
	}
	return rec, nil
}

// List returns every record, newest first; unreadable files are skipped.
func (rs *Records) List() ([]Record, error) {
	entries, err := os.ReadDir(rs.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Record
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !ValidID(id) {
			continue
		}
		if rec, err := rs.Get(id); err == nil {
			out = append(out, rec)
		}
	}
	slices.SortFunc(out, func(a, b Record) int { return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(b.ID, a.ID)) })
	return out, nil
}

// MarkKilled marks every running record of a runtime that is no longer
// alive as killed (the boot sweep: its process died while it drove).
func (rs *Records) MarkKilled(alive func(runtimeID string) bool, now time.Time) (int, error) {
	recs, err := rs.List()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, rec := range recs {
		if !rec.State.Live() || alive(rec.Runtime) {
			continue
		}
		if _, err := rs.Update(rec.ID, func(r *Record) {
			r.State, r.UpdatedAt, r.EndedAt = StateKilled, now, now
			r.Question = nil
			r.Error = cmp.Or(r.Error, "the process that ran this driver ended while it ran")
		}); err == nil {
			n++
		}
	}
	return n, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
