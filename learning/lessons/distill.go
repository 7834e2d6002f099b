package lessons

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/codesession/codesession/learning/outcomes"
)

// MaxBatch bounds the outcomes one pass shows the model; the rest wait for
// the next pass (the cursor says where it stopped).
const MaxBatch = 200

// SystemPrompt is what the distiller model is told. It forbids posture
// and escalation advice; the parser enforces that as well.
const SystemPrompt = `You distil short, scoped lessons about coding-agent backends from the outcomes of past sessions.
Answer with exactly one JSON object and nothing else:
{"lessons":[{"text":"...","backend":"...","model":"...","tags":["..."],"sessions":["<sessionId>"],"reinforces":"<lesson id>"}]}
Rules:
- text: one lesson, at most 300 characters, about which backend, model and effort suit which kind of task, or why runs failed.
- backend, model, tags: the scope the lesson applies to; leave a field empty ("" or []) to apply everywhere.
- sessions: the session ids (from the outcomes below) that support the lesson; cite only ids listed below.
- reinforces: the id of an existing lesson this one restates, else "".
- Never give advice about posture, permissions, approvals, clarifications, sandboxes or escalation: lessons never touch posture.
- Answer {"lessons":[]} when nothing is worth learning.`

// outcomeLine is what the model sees of one outcome.
type outcomeLine struct {
	SessionID     string   `json:"sessionId"`
	Backend       string   `json:"backend"`
	Model         string   `json:"model,omitempty"`
	Effort        string   `json:"effort,omitempty"`
	Tags          []string `json:"tags,omitempty"`
	Outcome       string   `json:"outcome"`
	Rounds        int      `json:"rounds"`
	Interventions int      `json:"interventions,omitempty"`
	FailureReason string   `json:"failureReason,omitempty"`
	DriverNote    string   `json:"driverNote,omitempty"`
}

// Prompt renders the user prompt: the lessons so far and the new outcomes.
func Prompt(b Book, batch []outcomes.Record) string {
	var s strings.Builder
	s.WriteString("Existing lessons (id, confidence, scope, text):\n")
	if len(b.Lessons) == 0 {
		s.WriteString("(none)\n")
	}
	for _, l := range b.Lessons {
		fmt.Fprintf(&s, "%s %.2f backend=%q model=%q tags=%q: %s\n", l.ID, l.Confidence, l.Scope.Backend, l.Scope.Model, l.Scope.Tags, l.Text)
	}
	s.WriteString("\nNew outcomes, one JSON object per line:\n")
	for _, r := range batch {
		line, _ := json.Marshal(outcomeLine{SessionID: r.SessionID, Backend: r.BackendID, Model: r.Model, Effort: string(r.Effort),
			Tags: r.TaskTags, Outcome: string(r.Outcome), Rounds: r.Rounds, Interventions: r.Interventions.Total(),
			FailureReason: cutRunes(r.FailureReason, 200), DriverNote: cutRunes(r.DriverNote, 200)})
		s.Write(line)
		s.WriteByte('\n')
	}
	return s.String()
}

func cutRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

// proposal is one lesson as the model writes it.
type proposal struct {
	Text       string   `json:"text"`
	Backend    string   `json:"backend"`
	Model      string   `json:"model"`
	Tags       []string `json:"tags"`
	Sessions   []string `json:"sessions"`
	Reinforces string   `json:"reinforces"`
}

// Parse reads the model's answer strictly: one JSON object (optionally in a
// ```json fence) with only a "lessons" array of proposals with only the
// known fields. An answer that is not that is an error; a proposal that is
// malformed (bad text, posture advice, no cited session of this batch) is
// dropped with a warning. Supports come from the batch (its start revision).
func Parse(answer string, batch []outcomes.Record) ([]Candidate, []string, error) {
	body := strings.TrimSpace(answer)
	if rest, ok := strings.CutPrefix(body, "```"); ok {
		rest = strings.TrimPrefix(rest, "json")
		end := strings.LastIndex(rest, "```")
		if end < 0 {
			return nil, nil, fmt.Errorf("an unterminated code fence")
		}
		body = strings.TrimSpace(rest[:end])
	}
	var doc struct {
		Lessons []json.RawMessage `json:"lessons"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, nil, fmt.Errorf("not the asked-for JSON object: %w", err)
	}
	if dec.More() {
		return nil, nil, fmt.Errorf("text after the JSON object")
	}
	if doc.Lessons == nil {
		return nil, nil, fmt.Errorf(`no "lessons" array`)
	}
	bySession := map[string]outcomes.Record{}
	for _, r := range batch {
		bySession[r.SessionID] = r
	}
	var out []Candidate
	var warns []string
	for i, raw := range doc.Lessons {
		var p proposal
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&p); err != nil {
			warns = append(warns, fmt.Sprintf("lesson %d dropped: malformed: %v", i, err))
			continue
		}
		p.Text = strings.TrimSpace(p.Text)
		if err := validText(p.Text); err != nil {
			warns = append(warns, fmt.Sprintf("lesson %d dropped: text %v", i, err))
			continue
		}
		c := Candidate{Reinforces: strings.TrimSpace(p.Reinforces), Text: p.Text,
			Scope: Scope{Backend: strings.TrimSpace(p.Backend), Model: strings.TrimSpace(p.Model), Tags: cleanTags(p.Tags)}}
		for _, sid := range p.Sessions {
			r, ok := bySession[sid]
			if !ok {
				warns = append(warns, fmt.Sprintf("lesson %d cites session %q, which is not in this batch: ignored", i, sid))
				continue
			}
			c.Supports = append(c.Supports, Support{SessionID: r.SessionID, Revision: r.StartRevision})
		}
		if len(c.Supports) == 0 {
			warns = append(warns, fmt.Sprintf("lesson %d dropped: it cites no outcome of this batch", i))
			continue
		}
		out = append(out, c)
	}
	return out, warns, nil
}

func cleanTags(tags []string) []string {
	var out []string
	for _, t := range tags {
		if t = strings.TrimSpace(t); t != "" && len(t) <= 64 {
			out = append(out, t)
		}
	}
	return out
}

// Report says what a pass did.
type Report struct {
	At         time.Time `json:"at"`
	Model      string    `json:"model,omitempty"`
	Outcomes   int       `json:"outcomes"`
	Proposed   int       `json:"proposed"`
	Created    int       `json:"created"`
	Reinforced int       `json:"reinforced"`
	// Unsupported counts proposals dropped for want of independent evidence.
	Unsupported int `json:"unsupported"`
	// EvictedDecay and EvictedCap count lessons each rule removed.
	EvictedDecay int      `json:"evictedDecay"`
	EvictedCap   int      `json:"evictedCap"`
	Lessons      int      `json:"lessons"`
	Warnings     []string `json:"warnings,omitempty"`
}

// PassOptions configure a pass.
type PassOptions struct {
	Model  Model
	Now    time.Time
	Logger *slog.Logger
}

// Pass runs one distillation pass over all (the outcome log, oldest first)
// and persists the book. On error nothing is written.
func Pass(ctx context.Context, st *Store, all []outcomes.Record, o PassOptions) (Report, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	rep := Report{At: o.Now}
	err := st.Locked(func() error {
		book, err := st.Load()
		if err != nil {
			return err
		}
		cursor := min(max(book.Cursor, 0), len(all))
		batch := all[cursor:]
		if len(batch) > MaxBatch {
			batch = batch[:MaxBatch]
		}
		rep.Outcomes = len(batch)
		if len(batch) > 0 {
			if o.Model == nil {
				return fmt.Errorf("no distiller model configured")
			}
			rep.Model = o.Model.Name()
			book.Decay(o.Now)
			answer, err := o.Model.Complete(ctx, SystemPrompt, Prompt(book, batch))
			if err != nil {
				return fmt.Errorf("the distiller model failed: %w", err)
			}
			cands, warns, err := Parse(answer, batch)
			if err != nil {
				return fmt.Errorf("the distiller's answer was rejected: %w", err)
			}
			rep.Proposed, rep.Warnings = len(cands), warns
			for _, c := range cands {
				created, reinforced := book.Upsert(c, o.Now)
				if created {
					rep.Created++
				} else if reinforced == 0 && book.find(c.Reinforces, c.Text, c.Scope) < 0 {
					rep.Unsupported++
				}
				rep.Reinforced += reinforced
			}
		}
		book.Cursor = cursor + len(batch)
		rep.EvictedDecay, rep.EvictedCap = book.Evict(o.Now)
		rep.Lessons = len(book.Lessons)
		book.PassAt = o.Now
		return st.Save(book)
	})
	for _, w := range rep.Warnings {
		o.Logger.Warn("lesson distiller: "+w, "model", rep.Model)
	}
	if err != nil {
		o.Logger.Warn("lesson distillation pass failed", "err", err)
		return rep, err
	}
	o.Logger.Info("lesson distillation pass", "outcomes", rep.Outcomes, "created", rep.Created, "reinforced", rep.Reinforced,
		"unsupported", rep.Unsupported, "evictedDecay", rep.EvictedDecay, "evictedCap", rep.EvictedCap, "lessons", rep.Lessons)
	return rep, nil
}
