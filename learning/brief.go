package learning

import (
	"regexp"
	"slices"
	"strings"

	"github.com/codesession/codesession/messages"
)

// ReadOnlyTags mark a session whose brief asks for an answer, not changes.
var ReadOnlyTags = []string{"read-only", "readonly", "question", "review", "explain", "research"}

var (
	// changeWords name a change anywhere in a brief.
	changeWords = regexp.MustCompile(`(?i)\b(fix|add|implement|write|create|edit|change|refactor|update|remove|delete|rename|modify|make|build|port|migrate|replace|append|insert|bump|upgrade|patch|commit|move|convert|generate|scaffold|set up|setup|resolve|solve|repair|clean up|tidy|format|install|configure|wire|hook up|continue|should|must|needs? to)\b`)
	// leadingWork is an imperative that asks for work when it opens a
	// brief ("do it", "go ahead", "finish the task"), not inside a
	// question ("what does main.go do?").
	leadingWork = regexp.MustCompile(`(?i)^\W*(please\W+)?(do|go ahead|proceed|finish|complete|carry on|resume|start)\b`)
)

// ReadOnly reasons: why a brief counts as asking for no change.
const (
	ReadOnlyByPosture = "its ceiling is plan"
	ReadOnlyByTag     = "a read-only tag"
	ReadOnlyByWording = "its wording asks for no change"
)

// BriefReadOnly reports whether a session asked for an answer rather than
// changes, and why: its ceiling is plan (it cannot write), a tag says so,
// or its wording names no change ("hello", "what does main.go do?"). The
// wording test fails safe: anything that might ask for changes (a change
// verb, "should", an opening imperative) counts as asking, so an inferred
// success then needs a change to show.
func BriefReadOnly(brief string, maxPosture messages.Posture, tags []string) (readOnly bool, why string) {
	if maxPosture == messages.PosturePlan {
		return true, ReadOnlyByPosture
	}
	for _, t := range tags {
		if slices.Contains(ReadOnlyTags, strings.ToLower(t)) {
			return true, ReadOnlyByTag
		}
	}
	if changeWords.MatchString(brief) || leadingWork.MatchString(brief) {
		return false, ""
	}
	return true, ReadOnlyByWording
}

// ReadOnlyBrief is BriefReadOnly's answer alone.
func ReadOnlyBrief(brief string, maxPosture messages.Posture, tags []string) bool {
	ro, _ := BriefReadOnly(brief, maxPosture, tags)
	return ro
}
