package lessons

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Tunables (seed 000 §7).
const (
	MaxLessons        = 40
	MaxLessonChars    = 300
	DecayPerWeek      = 0.95
	EvictBelow        = 0.3
	NewConfidence     = 0.6
	ReinforceStep     = 0.1
	InjectMinEvidence = 2
	week              = 7 * 24 * time.Hour
)

// Scope narrows where a lesson applies; empty fields apply everywhere.
type Scope struct {
	Backend string   `json:"backend,omitempty"`
	Model   string   `json:"model,omitempty"`
	Tags    []string `json:"tags,omitempty"`
}

func (s Scope) key() string {
	t := slices.Clone(s.Tags)
	sort.Strings(t)
	return strings.ToLower(s.Backend) + "|" + strings.ToLower(s.Model) + "|" + strings.ToLower(strings.Join(t, ","))
}

// Lesson is one distilled lesson.
type Lesson struct {
	ID    string `json:"id"`
	Text  string `json:"text"`
	Scope Scope  `json:"scope"`
	// Base is the confidence right after the last reinforcement; Confidence
	// is Base decayed to the book's last pass (see Decayed).
	Base       float64 `json:"base"`
	Confidence float64 `json:"confidence"`
	Evidence   int     `json:"evidence"`
	// Sessions and Revisions are the distinct supports counted so far.
	Sessions     []string  `json:"sessions"`
	Revisions    []string  `json:"revisions"`
	CreatedAt    time.Time `json:"createdAt"`
	ReinforcedAt time.Time `json:"reinforcedAt"`
}

// Decayed returns the lesson's confidence at now: Base times DecayPerWeek
// for each whole week since the last reinforcement. It depends only on Base
// and ReinforcedAt, so applying it again never compounds.
func (l Lesson) Decayed(now time.Time) float64 {
	weeks := math.Floor(now.Sub(l.ReinforcedAt).Hours() / week.Hours())
	if weeks < 0 {
		weeks = 0
	}
	return round(l.Base * math.Pow(DecayPerWeek, weeks))
}

func round(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// Support is one outcome offered as evidence for a lesson.
type Support struct {
	SessionID string
	Revision  string
}

// independent reports whether s is new evidence for l: a known revision
// (fail closed without one), and neither its session nor its revision
// already counted.
func (l *Lesson) independent(s Support) bool {
	return s.Revision != "" && s.SessionID != "" &&
		!slices.Contains(l.Sessions, s.SessionID) && !slices.Contains(l.Revisions, s.Revision)
}

// reinforce counts s if it is independent; it reports whether it did.
func (l *Lesson) reinforce(s Support, now time.Time, first bool) bool {
	if !l.independent(s) {
		return false
	}
	l.Sessions = append(l.Sessions, s.SessionID)
	l.Revisions = append(l.Revisions, s.Revision)
	l.Evidence++
	if !first {
		l.Base = round(math.Min(1, l.Decayed(now)+ReinforceStep))
		l.ReinforcedAt = now
	}
	l.Confidence = l.Decayed(now)
	return true
}

// normalize is how two phrasings of one lesson are recognised as one:
// case, punctuation and spacing do not count.
func normalize(s string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteRune(r)
			space = false
		} else {
			space = true
		}
	}
	return b.String()
}

// Book is lessons.json.
type Book struct {
	Version int `json:"version"`
	// Cursor is how many outcome records earlier passes have read.
	Cursor  int       `json:"cursor"`
	NextID  int       `json:"nextId"`
	Lessons []Lesson  `json:"lessons"`
	PassAt  time.Time `json:"passAt,omitempty"`
}

// BookVersion is the lessons.json schema this code writes.
const BookVersion = 1

func (b *Book) find(id string, text string, sc Scope) int {
	n, k := normalize(text), sc.key()
	for i, l := range b.Lessons {
		if (id != "" && l.ID == id) || (normalize(l.Text) == n && l.Scope.key() == k) {
			return i
		}
	}
	return -1
}

// Candidate is a lesson the model proposed, with the outcomes it cites.
type Candidate struct {
	// Reinforces names an existing lesson the model says this restates.
	Reinforces string
	Text       string
	Scope      Scope
	Supports   []Support
}

// Upsert applies one candidate: an existing lesson (by id, or the same
// text and scope) is reinforced once per independent support; a new one
// is added when at least one support is independent (an unsupported
// lesson is no lesson: fail closed). It reports what happened.
func (b *Book) Upsert(c Candidate, now time.Time) (created bool, reinforced int) {
	if i := b.find(c.Reinforces, c.Text, c.Scope); i >= 0 {
		l := &b.Lessons[i]
		for _, s := range c.Supports {
			if l.reinforce(s, now, false) {
				reinforced++
			}
		}
		return false, reinforced
	}
	b.NextID++
	l := Lesson{ID: fmt.Sprintf("L%d", b.NextID), Text: c.Text, Scope: c.Scope, Base: NewConfidence,
		CreatedAt: now, ReinforcedAt: now, Sessions: []string{}, Revisions: []string{}}
	first := true
	for _, s := range c.Supports {
		if l.reinforce(s, now, first) {
			if !first {
				reinforced++
			}
			first = false
		}
	}
	if l.Evidence == 0 {
		b.NextID--
		return false, 0
	}
	l.Confidence = l.Decayed(now)
	b.Lessons = append(b.Lessons, l)
	return true, reinforced
}

// Decay brings every lesson's Confidence to now.
func (b *Book) Decay(now time.Time) {
	for i := range b.Lessons {
		b.Lessons[i].Confidence = b.Lessons[i].Decayed(now)
	}
}

// Evict drops lessons below EvictBelow, then the lowest-confidence ones
// past MaxLessons, and orders the book by confidence (ties by id). It
// returns how many each rule dropped.
func (b *Book) Evict(now time.Time) (decayed, capped int) {
	b.Decay(now)
	kept := b.Lessons[:0]
	for _, l := range b.Lessons {
		if l.Confidence < EvictBelow {
			decayed++
			continue
		}
		kept = append(kept, l)
	}
	b.Lessons = kept
	sortLessons(b.Lessons)
	if len(b.Lessons) > MaxLessons {
		capped = len(b.Lessons) - MaxLessons
		b.Lessons = b.Lessons[:MaxLessons]
	}
	return decayed, capped
}

func sortLessons(ls []Lesson) {
	sort.SliceStable(ls, func(i, j int) bool {
		if ls[i].Confidence != ls[j].Confidence {
			return ls[i].Confidence > ls[j].Confidence
		}
		return ls[i].ID < ls[j].ID
	})
}

// validText checks a lesson's text: non-empty, at most MaxLessonChars
// characters, and no posture or escalation advice (lessons never touch
// posture).
func validText(s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return fmt.Errorf("empty")
	case utf8.RuneCountInString(s) > MaxLessonChars:
		return fmt.Errorf("%d characters, over %d", utf8.RuneCountInString(s), MaxLessonChars)
	case postureAdvice.MatchString(s):
		return fmt.Errorf("gives posture or escalation advice")
	}
	return nil
}

var postureAdvice = regexp.MustCompile(`(?i)posture|escalat|bypass|acceptedits|full access|permission|allow_session|clarif|approv|ceiling|sandbox|dangerously|skip.{0,12}(check|gate|ask)`)
