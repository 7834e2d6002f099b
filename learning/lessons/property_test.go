package lessons

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/learning/outcomes"
	"github.com/codesession/codesession/messages"
)

// randomModel proposes whatever a careless model might: long and short
// texts, repeats, unknown sessions, scopes of every kind.
type randomModel struct {
	r     *rand.Rand
	batch []outcomes.Record
}

func (m *randomModel) Name() string { return "random" }

func (m *randomModel) Complete(_ context.Context, _, prompt string) (string, error) {
	var ids []string
	for _, line := range strings.Split(prompt, "\n") {
		var o struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal([]byte(line), &o) == nil && o.SessionID != "" {
			ids = append(ids, o.SessionID)
		}
	}
	ps := []map[string]any{}
	for range m.r.IntN(50) {
		n := 1 + m.r.IntN(420)
		text := fmt.Sprintf("lesson %d ", m.r.IntN(80)) + strings.Repeat("é", n)
		var cites []string
		for range 1 + m.r.IntN(3) {
			if len(ids) > 0 && m.r.IntN(5) > 0 {
				cites = append(cites, ids[m.r.IntN(len(ids))])
			} else {
				cites = append(cites, "unknown")
			}
		}
		backends := []string{"", "codex", "claude-code", "mystery"}
		ps = append(ps, map[string]any{"text": text, "backend": backends[m.r.IntN(4)], "model": "", "tags": []string{},
			"sessions": cites, "reinforces": fmt.Sprintf("L%d", m.r.IntN(100))})
	}
	b, err := json.Marshal(map[string]any{"lessons": ps})
	return string(b), err
}

func TestPropertyBoundsHoldForAnySequence(t *testing.T) {
	for seed := range uint64(6) {
		r := rand.New(rand.NewPCG(seed, 99))
		st := NewStore(t.TempDir())
		m := &randomModel{r: r}
		var all []outcomes.Record
		now := t0
		for step := range 15 {
			for range r.IntN(40) {
				rev := ""
				if r.IntN(4) > 0 {
					rev = fmt.Sprintf("r%d", r.IntN(30))
				}
				all = append(all, outcomes.Record{SessionID: fmt.Sprintf("s%d-%d-%d", seed, step, r.IntN(1000)),
					BackendID: "codex", Outcome: messages.OutcomeSuccess, StartRevision: rev})
			}
			now = now.Add(time.Duration(r.IntN(10*24)) * time.Hour)
			_, err := Pass(context.Background(), st, all, PassOptions{Model: m, Now: now, Logger: quiet})
			require.NoError(t, err)
			book, err := st.Load()
			require.NoError(t, err)
			require.LessOrEqual(t, len(book.Lessons), MaxLessons, "seed %d step %d", seed, step)
			for _, l := range book.Lessons {
				require.LessOrEqual(t, utf8.RuneCountInString(l.Text), MaxLessonChars)
				require.GreaterOrEqual(t, l.Confidence, EvictBelow)
				require.Equal(t, len(l.Sessions), l.Evidence, "evidence is the count of distinct supports")
				require.Equal(t, len(l.Revisions), l.Evidence)
			}
			for _, f := range []Filter{{}, {Backend: "codex", Known: []string{"codex"}}, {Backend: "mystery"}} {
				require.LessOrEqual(t, len(Block(book, f, now)), MaxBlockBytes)
			}
		}
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
