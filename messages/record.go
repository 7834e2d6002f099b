package messages

import (
	"time"
	"unicode/utf8"
)

// TaskBriefMax caps the brief stored on a record, in bytes.
const TaskBriefMax = 2048

// RecordVersion is the meta.json schema version this code writes.
const RecordVersion = 1

// Run is one entry of a record's resume chain.
type Run struct {
	StartedAt         time.Time `json:"startedAt" msgpack:"startedAt"`
	ExternalSessionID string    `json:"externalSessionId,omitempty" msgpack:"externalSessionId,omitempty"`
	OwnerScopeID      string    `json:"ownerScopeId" msgpack:"ownerScopeId"`
	// Runtime is the id of the runtime (process) that drove this run; the
	// orphan sweep leaves alone runs whose runtime is still alive.
	Runtime string `json:"runtime,omitempty" msgpack:"runtime,omitempty"`
	// Containment is what the runtime's containment applied to this run's
	// processes (nil: the backend reported none, or runs no process).
	Containment *Applied `json:"containment,omitempty" msgpack:"containment,omitempty"`
}

// Applied is the confinement one run of a session got on its host: the
// backend's descriptor says what the host can do, this what was done.
type Applied struct {
	// LandlockABI is the kernel's Landlock ABI (0: none, nothing confined).
	LandlockABI int `json:"landlockAbi" msgpack:"landlockAbi"`
	// Writable are the only paths the process tree may write under.
	Writable []string `json:"writable,omitempty" msgpack:"writable,omitempty"`
	// ReadDenied are the paths it may not read (credential folders, the
	// daemon's home); ReadAllowed the ones under them it may (the
	// session's own folders in the daemon's home).
	ReadDenied  []string `json:"readDenied,omitempty" msgpack:"readDenied,omitempty"`
	ReadAllowed []string `json:"readAllowed,omitempty" msgpack:"readAllowed,omitempty"`
	// ReadsOpen: the backend lists HOME, so reads are not restricted (set
	// by runtimes before listing CLIs got a HOME of their own; read only
	// from old records).
	ReadsOpen bool `json:"readsOpen,omitempty" msgpack:"readsOpen,omitempty"`
	// Network is the mode asked (open, model-only, loopback); ConnectTCP
	// the TCP ports the tree may connect to when it is not open.
	Network    string   `json:"network" msgpack:"network"`
	ConnectTCP []uint16 `json:"connectTcp,omitempty" msgpack:"connectTcp,omitempty"`
	// Relayed are the host endpoints a loopback session's own network
	// namespace relays (its model endpoint on the host's loopback); empty
	// when the session has no namespace.
	Relayed []string `json:"relayed,omitempty" msgpack:"relayed,omitempty"`
	// BestEffort says what was asked and does not hold here (an old ABI,
	// loopback enforced per port), one sentence each.
	BestEffort []string `json:"bestEffort,omitempty" msgpack:"bestEffort,omitempty"`
}

// SessionRecord is a session's meta.json.
type SessionRecord struct {
	SessionID     string    `json:"sessionId" msgpack:"sessionId"`
	BackendID     string    `json:"backendId" msgpack:"backendId"`
	Cwd           string    `json:"cwd" msgpack:"cwd"`
	Model         string    `json:"model,omitempty" msgpack:"model,omitempty"`
	Effort        Effort    `json:"effort,omitempty" msgpack:"effort,omitempty"`
	MaxPosture    Posture   `json:"maxPosture" msgpack:"maxPosture"`
	Posture       Posture   `json:"posture" msgpack:"posture"`
	MaxRounds     int       `json:"maxRounds,omitempty" msgpack:"maxRounds,omitempty"`
	MaxCostUSD    float64   `json:"maxCostUsd,omitempty" msgpack:"maxCostUsd,omitempty"`
	AllowedTools  []string  `json:"allowedTools,omitempty" msgpack:"allowedTools,omitempty"`
	TaskBrief     string    `json:"taskBrief" msgpack:"taskBrief"`
	TaskTags      []string  `json:"taskTags,omitempty" msgpack:"taskTags,omitempty"`
	Status        Status    `json:"status" msgpack:"status"`
	CreatedAt     time.Time `json:"createdAt" msgpack:"createdAt"`
	UpdatedAt     time.Time `json:"updatedAt" msgpack:"updatedAt"`
	RoundsElapsed int       `json:"roundsElapsed" msgpack:"roundsElapsed"`
	CostUSD       float64   `json:"costUsd,omitempty" msgpack:"costUsd,omitempty"`
	Runs          []Run     `json:"runs" msgpack:"runs"`
	Outcome       Outcome   `json:"outcome,omitempty" msgpack:"outcome,omitempty"`
	OutcomeNote   string    `json:"outcomeNote,omitempty" msgpack:"outcomeNote,omitempty"`
	Version       int       `json:"version" msgpack:"version"`
	// Worktree is set when the session works in its own git worktree
	// (Start.Isolate worktree); Cwd is then inside it.
	Worktree *Worktree `json:"worktree,omitempty" msgpack:"worktree,omitempty"`
	// Provision is what capability curation detected and provisioned for
	// the session (seed 000 §9); nil when it did not run (no cwd).
	Provision *Provision `json:"provision,omitempty" msgpack:"provision,omitempty"`
}

// Worktree is a session's isolation: a git worktree of the user's
// repository on a branch of its own, so its changes (and its diffs) never
// mix with the user's checkout or another session's until merged.
type Worktree struct {
	// Path is the worktree's root, under <home>/worktrees.
	Path string `json:"path" msgpack:"path"`
	// Branch is codesession/<short id>.
	Branch string `json:"branch" msgpack:"branch"`
	// Repo is the root of the repository it was added to (the user's
	// checkout); Base the commit it started from.
	Repo string `json:"repo" msgpack:"repo"`
	Base string `json:"base" msgpack:"base"`
}

// Validate checks the fields a store relies on.
func (r *SessionRecord) Validate() error {
	const op = "record"
	if err := validateSessionID(op, r.SessionID); err != nil {
		return err
	}
	if r.BackendID == "" {
		return FieldError(op, "backendId", "required")
	}
	if !r.Status.Valid() {
		return FieldError(op, "status", "unknown status %q", r.Status)
	}
	if r.MaxPosture != "" && !r.MaxPosture.Valid() {
		return FieldError(op, "maxPosture", "unknown posture %q", r.MaxPosture)
	}
	if len(r.TaskBrief) > TaskBriefMax {
		return FieldError(op, "taskBrief", "longer than %d bytes", TaskBriefMax)
	}
	return nil
}

// LatestRun returns the last run, or nil.
func (r *SessionRecord) LatestRun() *Run {
	if len(r.Runs) == 0 {
		return nil
	}
	return &r.Runs[len(r.Runs)-1]
}

// Clone returns a deep copy.
func (r SessionRecord) Clone() SessionRecord {
	r.AllowedTools = append([]string(nil), r.AllowedTools...)
	r.TaskTags = append([]string(nil), r.TaskTags...)
	r.Runs = append([]Run(nil), r.Runs...)
	if r.Worktree != nil {
		w := *r.Worktree
		r.Worktree = &w
	}
	r.Provision = r.Provision.Clone()
	return r
}

// CapBrief cuts a brief to TaskBriefMax bytes on a rune boundary.
func CapBrief(s string) string {
	if len(s) <= TaskBriefMax {
		return s
	}
	cut := TaskBriefMax
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
