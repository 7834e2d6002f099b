// Package trackrecord renders the list-backends track-record lines from
// the outcome log (seed 000 §7): per backend "codex: 7 runs, 71% success,
// avg 4.2 rounds, last failure: ... (3d ago)", then a sub-line per
// (backend, model) with at least two runs. A backend with no history gets
// no lines.
//
// Lines is pure. Cache keeps the rendered lines about 60 s and rebuilds
// sooner when the log's generation changes (a new outcome, here or read
// from another process) or Invalidate is called; it is safe for concurrent
// use and takes its clock as an argument, so tests need no sleeping.
package trackrecord

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/codesession/codesession/learning/outcomes"
	"github.com/codesession/codesession/messages"
)

// TTL is how long Cache serves lines without looking at the log again.
const TTL = 60 * time.Second

// MinModelRuns is how many runs a model needs for its own sub-line.
const MinModelRuns = 2

// maxReason bounds the failure reason quoted on a line.
const maxReason = 80

type stats struct {
	runs, wins, rounds int
	lastFail           *outcomes.Record
}

func (s *stats) add(r outcomes.Record) {
	s.runs++
	s.rounds += r.Rounds
	if r.Success() {
		s.wins++
	}
	failed := r.Outcome == messages.OutcomeFailed || r.Outcome == messages.OutcomeAborted
	if failed && (s.lastFail == nil || !r.EndedAt.Before(s.lastFail.EndedAt)) {
		rc := r
		s.lastFail = &rc
	}
}

func (s *stats) line(name string, now time.Time, withFailure bool) string {
	l := fmt.Sprintf("%s: %d run%s, %d%% success, avg %.1f rounds", name, s.runs, plural(s.runs),
		(s.wins*100+s.runs/2)/s.runs, float64(s.rounds)/float64(s.runs))
	if withFailure && s.lastFail != nil {
		reason := s.lastFail.FailureReason
		if reason == "" {
			reason = string(s.lastFail.Outcome)
		}
		l += fmt.Sprintf(", last failure: %s (%s)", cut(reason, maxReason), Ago(now.Sub(s.lastFail.EndedAt)))
	}
	return l
}

// Lines renders backend's track record from all outcomes, as of now.
func Lines(backend string, all []outcomes.Record, now time.Time) []string {
	var total stats
	models := map[string]*stats{}
	for _, r := range all {
		if r.BackendID != backend {
			continue
		}
		total.add(r)
		if r.Model != "" {
			if models[r.Model] == nil {
				models[r.Model] = &stats{}
			}
			models[r.Model].add(r)
		}
	}
	if total.runs == 0 {
		return nil
	}
	out := []string{total.line(backend, now, true)}
	names := make([]string, 0, len(models))
	for m, s := range models {
		if s.runs >= MinModelRuns {
			names = append(names, m)
		}
	}
	sort.Strings(names)
	for _, m := range names {
		out = append(out, "  "+models[m].line(backend+" / "+m, now, false))
	}
	return out
}

// Ago says how long ago d was, coarsely: "just now", "12m ago", "5h ago", "3d ago".
func Ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	for len(string(r)) > n-1 {
		r = r[:len(r)-1]
	}
	return string(r) + "…"
}

// Source is what the cache reads: the outcome log.
type Source interface {
	All() ([]outcomes.Record, uint64)
	Refresh() error
}

// Cache serves Lines from a snapshot at most TTL old.
type Cache struct {
	src Source

	mu    sync.Mutex
	built time.Time
	gen   uint64
	all   []outcomes.Record
	valid bool
}

// NewCache serves lines from src.
func NewCache(src Source) *Cache { return &Cache{src: src} }

// Invalidate makes the next Lines read the log again.
func (c *Cache) Invalidate() {
	c.mu.Lock()
	c.valid = false
	c.mu.Unlock()
}

// Lines returns backend's track-record lines as of now.
func (c *Cache) Lines(backend string, now time.Time) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, gen := c.src.All()
	if !c.valid || gen != c.gen || now.Sub(c.built) >= TTL {
		if now.Sub(c.built) >= TTL || !c.valid {
			_ = c.src.Refresh() // another process's outcomes; a failed read keeps what we have
		}
		c.all, c.gen = c.src.All()
		c.built, c.valid = now, true
	}
	return Lines(backend, c.all, c.built)
}
