package modelmock

import (
	"net/http"
	"regexp"
	"strings"
)

// Side requests of the agents on the Chat Completions and Gemini wires:
// opencode's session title (a tool-less call whose system prompt is a
// title generator), gemini-cli's session summary and its other tool-less
// helper calls (generateContent, not streamed). They are answered without
// the scenario and never count against it, so a scenario scripts only the
// agent's turns.

// KindSummary is a session-summary or other tool-less helper call of an
// agent (gemini-cli's flash-lite summary).
const KindSummary Kind = "summary"

var (
	titleRe   = regexp.MustCompile(`(?i)title generator|generate a (brief |short )?title`)
	summaryRe = regexp.MustCompile(`(?i)summari[sz]e the (user|conversation)|in one sentence \(max`)
)

// sideKind classifies a decoded request of the Chat Completions or Gemini
// wire: KindMain unless it offers no tools and reads as a title or summary
// request, or (Gemini) is a tool-less call that is not streamed.
func sideKind(wire string, c *Conversation) Kind {
	if len(c.Tools) > 0 {
		return KindMain
	}
	text := c.System
	for _, m := range c.Messages {
		for _, p := range m.Parts {
			if p.Kind == PartText {
				text += "\n" + p.Text
			}
		}
	}
	switch {
	case titleRe.MatchString(c.System):
		return KindTitle
	case summaryRe.MatchString(text):
		return KindSummary
	case wire == "gemini" && !c.Stream:
		return KindSummary
	}
	return KindMain
}

// sideStep is the canned answer of a side request.
func sideStep(k Kind, c *Conversation) Step {
	if k == KindTitle {
		return Step{Text: "Mock session"}
	}
	if strings.Contains(c.System, "next_speaker") || strings.Contains(c.LastUserText(), "next_speaker") {
		return Step{Text: `{"reasoning":"modelmock","next_speaker":"user"}`}
	}
	return Step{Text: "Mock summary"}
}

// answerSideOrMain answers a decoded request of the Chat Completions or
// Gemini wire: a side request with its canned step, anything else from the
// scenario. It records the request, waits the step's delay and writes an
// error step with errBody; ok false means the response is done.
func (s *Server) answerSideOrMain(rw http.ResponseWriter, r *http.Request, rec *Request, c *Conversation,
	errBody func(http.ResponseWriter, ErrorStep)) (rendered, Step, bool) {
	rec.Model = c.Model
	rec.conv = c
	rec.Kind = sideKind(rec.Wire, c)
	p := picked{rule: -1}
	if rec.Kind == KindMain {
		p = s.picker.pick(c)
	} else {
		p.step = sideStep(rec.Kind, c)
	}
	rec.Rule = p.rule
	s.publish(rec)
	st := p.step
	if st.Delay > 0 && !sleepCtx(r.Context(), st.Delay.D()) {
		return rendered{}, st, false
	}
	if st.Error != nil {
		rec.Status = st.Error.Status
		errBody(rw, *st.Error)
		return rendered{}, st, false
	}
	rec.Status = http.StatusOK
	return s.render(c.Model, &st, p.vars), st, true
}
