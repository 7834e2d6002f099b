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
	changeWords = regexp.MustCompile(`(?i)\b(fix|add|implement|write|create|edit|change|refactor|update|remove|delete|rename|modify|make|build|port|migrate|replace|append|insert|bump|upgrade|patch|commit|move|convert|generate|scaffold|set up|setup)\b`)
	askWords    = regexp.MustCompile(`(?i)\b(explain|describe|summari[sz]e|review|list|what|why|how|which|where|who|find out|tell|say|answer|reply|show|check|count|analy[sz]e|investigate|audit|report)\b`)
)

// ReadOnlyBrief reports whether a session asked for an answer rather than
// changes: its ceiling is plan (it cannot write), a tag says so, or the
// brief asks (a question word or a question mark) and names no change. The
// test fails safe: anything that might ask for changes counts as asking,
// so an inferred success then needs a change to show.
func ReadOnlyBrief(brief string, maxPosture messages.Posture, tags []string) bool {
	if maxPosture == messages.PosturePlan {
		return true
	}
	for _, t := range tags {
		if slices.Contains(ReadOnlyTags, strings.ToLower(t)) {
			return true
		}
	}
	if changeWords.MatchString(brief) {
		return false
	}
	return askWords.MatchString(brief) || strings.Contains(brief, "?")
}
