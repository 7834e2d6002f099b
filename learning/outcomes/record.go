package outcomes

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/codesession/codesession/learning"
	"github.com/codesession/codesession/messages"
)

// Record is one line of outcomes.jsonl: how one run of a session ended.
type Record struct {
	SessionID string `json:"sessionId"`
	// Run is the 1-based index of the session's run (a resumed session
	// gets one outcome per run).
	Run       int             `json:"run"`
	BackendID string          `json:"backendId"`
	Model     string          `json:"model,omitempty"`
	Effort    messages.Effort `json:"effort,omitempty"`
	TaskTags  []string        `json:"taskTags,omitempty"`
	Rounds    int             `json:"rounds"`
	// DurationMs runs from the run's start to its released event.
	DurationMs int64            `json:"durationMs"`
	CostUSD    float64          `json:"costUsd,omitempty"`
	Outcome    messages.Outcome `json:"outcome"`
	// Inferred: no driver verdict, the outcome was inferred (learning.Infer).
	Inferred      bool                   `json:"inferred,omitempty"`
	Interventions learning.Interventions `json:"interventions"`
	FailureReason string                 `json:"failureReason,omitempty"`
	// InferredReason says how an inferred success was inferred (a failure's
	// is FailureReason).
	InferredReason string                 `json:"inferredReason,omitempty"`
	DriverNote     string                 `json:"driverNote,omitempty"`
	ReleaseReason  messages.ReleaseReason `json:"releaseReason"`
	// StartRevision and EndRevision are the repository's HEAD when the run
	// started and when it was released; "" outside git (such an outcome is
	// never independent evidence for a lesson: fail closed, seed 004).
	StartRevision string    `json:"startRevision,omitempty"`
	EndRevision   string    `json:"endRevision,omitempty"`
	StartedAt     time.Time `json:"startedAt"`
	EndedAt       time.Time `json:"endedAt"`
}

// Key identifies a record: one per session run.
func (r Record) Key() string { return fmt.Sprintf("%s#%d", r.SessionID, r.Run) }

// Success reports whether the outcome is success.
func (r Record) Success() bool { return r.Outcome == messages.OutcomeSuccess }

// Build derives the outcome of the session's latest run from its record and
// its persisted events. It reports false when that run has not been
// released, or was released by a runtime shutdown (orphaned, resumable: not
// an outcome). editTools are the backend's edit-tool names.
func Build(rec messages.SessionRecord, events []messages.PersistedEvent, editTools []string, startRev, endRev string) (Record, bool) {
	// the latest run's events: those after the last adoption
	from := 0
	for i, e := range events {
		if e.Event.Type == messages.EvAdopted {
			from = i + 1
		}
	}
	t := learning.NewTally(editTools, "")
	for i := range events[from:] {
		t.ObserveRef(&events[from+i].Event)
	}
	rel := t.Released
	if rel == nil || rel.ReleaseReason == messages.ReleaseShutdown {
		return Record{}, false
	}
	var endedAt time.Time
	for i := len(events) - 1; i >= from; i-- {
		if events[i].Event.Type == messages.EvReleased {
			endedAt = events[i].At
			break
		}
	}
	startedAt := rec.CreatedAt
	if run := rec.LatestRun(); run != nil {
		startedAt = run.StartedAt
	}
	capped := rec.MaxRounds > 0 && rec.RoundsElapsed >= rec.MaxRounds
	readOnly, readOnlyWhy := learning.BriefReadOnly(rec.TaskBrief, rec.MaxPosture, rec.TaskTags)
	facts := t.Facts(rel.ReleaseReason == messages.ReleaseFailed, capped, readOnly)
	facts.ReadOnlyWhy = readOnlyWhy
	verdict := learning.Infer(facts)
	out := Record{
		SessionID: rec.SessionID, Run: max(1, len(rec.Runs)), BackendID: rec.BackendID,
		Model: concreteModel(rec.Model, t.Model), Effort: rec.Effort, TaskTags: slices.Clone(rec.TaskTags),
		Rounds: t.Closed, CostUSD: t.CostUSD, Outcome: rel.Outcome, Interventions: t.Interventions,
		DriverNote: rel.Note, ReleaseReason: rel.ReleaseReason, StartRevision: startRev, EndRevision: endRev,
		StartedAt: startedAt, EndedAt: endedAt,
	}
	if !endedAt.IsZero() && !startedAt.IsZero() {
		out.DurationMs = max(0, endedAt.Sub(startedAt).Milliseconds())
	}
	if !out.Outcome.Valid() {
		out.Outcome = verdict.Outcome
	}
	// the session stored the driver's verdict or its own inference; the
	// inference is replayed here, so a match with no note is the inference
	out.Inferred = out.Outcome == verdict.Outcome && rel.Note == ""
	if out.Inferred && out.Outcome == messages.OutcomeSuccess {
		out.InferredReason = verdict.Reason
	}
	if out.Outcome == messages.OutcomeFailed || out.Outcome == messages.OutcomeAborted {
		switch {
		case rel.ReleaseReason == messages.ReleaseFailed && rel.Text != "":
			out.FailureReason = rel.Text
		case out.Inferred || (out.Outcome == verdict.Outcome && verdict.Reason != ""):
			out.FailureReason = verdict.Reason
		default:
			out.FailureReason = firstNonEmpty(rel.Note, rel.Text, "the driver's verdict")
		}
	}
	return out, true
}

// Classes are the model-class sentinels; an outcome never records one.
var Classes = []string{"cheap", "standard", "frontier"}

func concreteModel(recorded, reported string) string {
	if recorded != "" && !slices.Contains(Classes, recorded) {
		return recorded
	}
	return reported
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// Filter selects outcomes; zero fields select everything.
type Filter struct {
	Backend string
	Model   string
	Tag     string
	Since   time.Time
}

// Match reports whether r passes the filter.
func (f Filter) Match(r Record) bool {
	return (f.Backend == "" || r.BackendID == f.Backend) &&
		(f.Model == "" || strings.EqualFold(r.Model, f.Model)) &&
		(f.Tag == "" || slices.Contains(r.TaskTags, f.Tag)) &&
		(f.Since.IsZero() || !r.EndedAt.Before(f.Since))
}

// Select returns the records that pass f, in order.
func Select(all []Record, f Filter) []Record {
	var out []Record
	for _, r := range all {
		if f.Match(r) {
			out = append(out, r)
		}
	}
	return out
}
