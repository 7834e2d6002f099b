package controlplane

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/codesession/codesession/actors/driver"
)

// TopicQuestion carries a driver's question to the human (seed 000 §2,
// questions out): a driven session's clarification its driver's policy
// does not answer, waiting on the delegation's record (state waiting), and
// once the human answered it (state answered). Answer it through POST
// /api/code-sessions/{id}/answer. Its frames carry no id: they move no
// cursor, and a reconnecting client reads open questions from GET
// /api/delegations (the record's question), which is durable before any
// frame is sent.
const TopicQuestion = "code_session_question"

// Question states.
const (
	QuestionWaiting  = "waiting"
	QuestionAnswered = "answered"
)

// QuestionData is the data of a code_session_question.
type QuestionData struct {
	State           string          `json:"state"` // QuestionWaiting or QuestionAnswered
	DelegationID    string          `json:"delegationId"`
	SessionID       string          `json:"sessionId"`
	ClarificationID string          `json:"clarificationId"`
	ToolName        string          `json:"toolName,omitempty"`
	Input           json.RawMessage `json:"input,omitempty"`
	At              time.Time       `json:"at"`
}

// questionFeed turns delegation record changes into code_session_question
// items: one waiting when a record's question appears, one answered when
// it goes. It keeps the question each delegation last showed.
type questionFeed struct {
	b    *Bridge
	mu   sync.Mutex
	open map[string]driver.Question // by delegation id
}

func newQuestionFeed(b *Bridge) *questionFeed {
	return &questionFeed{b: b, open: map[string]driver.Question{}}
}

// changed is the runtime's delegation-change seam (it must not block: it
// only takes the bridge's mutex, as Listen does).
func (f *questionFeed) changed(rec driver.Record) {
	f.mu.Lock()
	prev, had := f.open[rec.ID]
	var out []QuestionData
	switch {
	case rec.Question != nil && (!had || prev.ClarificationID != rec.Question.ClarificationID):
		if had {
			out = append(out, questionData(QuestionAnswered, rec.ID, prev))
		}
		f.open[rec.ID] = *rec.Question
		out = append(out, questionData(QuestionWaiting, rec.ID, *rec.Question))
	case rec.Question == nil && had:
		delete(f.open, rec.ID)
		out = append(out, questionData(QuestionAnswered, rec.ID, prev))
	}
	f.mu.Unlock()
	for _, q := range out {
		f.b.publishQuestion(q)
	}
}

func questionData(state, dl string, q driver.Question) QuestionData {
	return QuestionData{State: state, DelegationID: dl, SessionID: q.SessionID, ClarificationID: q.ClarificationID,
		ToolName: q.ToolName, Input: q.Input, At: q.At}
}

// publishQuestion offers a question to the subscribers of its session (and
// of every session) that asked for the topic.
func (b *Bridge) publishQuestion(q QuestionData) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.publishLocked(&item{topic: TopicQuestion, sid: q.SessionID, question: &q})
}

// question writes a code_session_question frame.
func (st *stream) question(q QuestionData) error {
	b, err := json.Marshal(q)
	if err != nil {
		return err
	}
	return st.raw(fmt.Sprintf("event: %s\ndata: %s\n\n", TopicQuestion, b))
}
