package messages

// DiffSource says where a turn diff came from.
type DiffSource string

const (
	DiffGit        DiffSource = "git"
	DiffToolEvents DiffSource = "tool-events"
	DiffNone       DiffSource = "none"
)

func (s DiffSource) Valid() bool    { return s == DiffGit || s == DiffToolEvents || s == DiffNone }
func (s DiffSource) String() string { return string(s) }

// FileChange is one changed file of a turn. Status is A, M, D or R; a rename
// carries OldPath. Counts are absent for binary files and for the
// tool-event fallback, which knows paths only.
type FileChange struct {
	Path       string `json:"path" msgpack:"path"`
	OldPath    string `json:"oldPath,omitempty" msgpack:"oldPath,omitempty"`
	Status     string `json:"status" msgpack:"status"`
	Insertions int    `json:"insertions,omitempty" msgpack:"insertions,omitempty"`
	Deletions  int    `json:"deletions,omitempty" msgpack:"deletions,omitempty"`
	Binary     bool   `json:"binary,omitempty" msgpack:"binary,omitempty"`
}

// TurnDiff is what a turn changed in the session's working directory.
// Files and Summary are always present; UnifiedDiff only when asked for.
type TurnDiff struct {
	Source       DiffSource   `json:"source" msgpack:"source"`
	Files        []FileChange `json:"files" msgpack:"files"`
	FilesOmitted int          `json:"filesOmitted,omitempty" msgpack:"filesOmitted,omitempty"`
	Summary      string       `json:"summary" msgpack:"summary"`
	UnifiedDiff  string       `json:"unifiedDiff,omitempty" msgpack:"unifiedDiff,omitempty"`
	Truncated    bool         `json:"truncated,omitempty" msgpack:"truncated,omitempty"`
	Warning      string       `json:"warning,omitempty" msgpack:"warning,omitempty"`
}

// WithoutUnified returns a copy of d without the unified diff, as read-turn
// returns it unless includeDiff is asked.
func (d *TurnDiff) WithoutUnified() *TurnDiff {
	if d == nil {
		return nil
	}
	c := *d
	c.UnifiedDiff = ""
	return &c
}
