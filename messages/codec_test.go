package messages

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleValues() []any {
	at := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	diff := &TurnDiff{Source: DiffGit, Files: []FileChange{{Path: "b.go", OldPath: "a.go", Status: "R", Insertions: 2, Deletions: 1}},
		FilesOmitted: 3, Summary: "1 file changed", UnifiedDiff: "diff --git", Truncated: true}
	return []any{
		&Start{Brief: "do it", MaxPosture: PostureAcceptEdits, InitialPosture: PosturePlan, Backend: "script", Cwd: "/w",
			Model: "m", Effort: EffortHigh, MaxRounds: 4, AllowedTools: []string{"Read"}, TaskTags: []string{"fix"}},
		&StartResult{SessionID: NewSessionID(), Backend: "script", Posture: PostureDefault, MaxPosture: PostureFull, MaxRounds: 3},
		&ReadTurn{SessionID: NewSessionID(), IncludeDiff: true},
		&TurnResult{Kind: KindTurnComplete, SessionID: NewSessionID(), Turn: 2, Text: "done",
			Actions:      []Action{{ToolUseID: "t1", ToolName: "Write", Input: json.RawMessage(`{"path":"x"}`), Result: "ok"}},
			RoundHistory: []HistoryEntry{{Turn: 1, Kind: HistDeny, Text: "no", Pinned: true}}, NumTurns: 2, CostUSD: 0.5,
			State: TurnCompleted, TurnDiff: diff},
		&TurnResult{Kind: KindClarification, ClarificationID: "c1", ToolName: "Bash", Input: json.RawMessage(`{"command":"ls"}`)},
		&Answer{SessionID: NewSessionID(), ClarificationID: "c1", Decision: DecisionDeny, Reason: "no"},
		&AnswerResult{OK: true, Clarification: Clarification{ID: "c1", ToolName: "Bash", Decision: DecisionDeny}},
		&Guide{SessionID: NewSessionID(), Text: "more", Mode: GuideSteer, Source: SourceUser},
		&SetPosture{SessionID: NewSessionID(), Posture: PostureFull},
		&SetPostureResult{OK: true, Posture: PosturePlan},
		&Interrupt{SessionID: NewSessionID()},
		&Stop{SessionID: NewSessionID(), Outcome: OutcomePartial, Note: "n"},
		&StopResult{OK: true, AlreadyStopped: true, Outcome: OutcomeSuccess},
		&ListBackendsResult{Backends: []BackendListing{{Descriptor: Descriptor{ID: "script", PostureMap: map[Posture]string{PosturePlan: "plan"},
			EffortMap: map[Effort]string{EffortMax: "high"}, Live: LiveControls{Interrupt: true, GuideModes: []GuideMode{GuideSteer}},
			ExternalAttach: &ExternalAttach{CommandTemplate: "x {sessionId}"}},
			Availability: Availability{Available: true, Version: "1", CheckedAt: at}}}},
		&SessionRecord{SessionID: NewSessionID(), BackendID: "script", Cwd: "/w", MaxPosture: PostureFull, Posture: PostureDefault,
			TaskBrief: "b", Status: StatusIdle, CreatedAt: at, UpdatedAt: at, RoundsElapsed: 2, CostUSD: 1.25,
			Runs: []Run{{StartedAt: at, ExternalSessionID: "ext", OwnerScopeID: "scope"}}, Version: RecordVersion},
		&SessionRecord{SessionID: NewSessionID(), BackendID: "claude-code", Cwd: "/w", MaxPosture: PostureFull, Posture: PostureDefault,
			Status: StatusRunning, CreatedAt: at, UpdatedAt: at, Runs: []Run{{StartedAt: at, OwnerScopeID: "scope"}}, Version: RecordVersion,
			Provision: &Provision{CapabilityIDs: []string{"supabase", "playwright"}, Applied: []string{"supabase"},
				Tiers: map[string]string{"supabase": TierRemoteMCP, "playwright": TierLocalMCP}, AwaitingApproval: []string{"playwright"},
				TokenScopeNotes: []string{"supabase: read-only"}, Notes: []string{"n"}, Manifest: "/h/m.json"}},
		&Approval{ID: "playwright@abc", CapabilityID: "playwright", Tier: TierLocalMCP, Identity: "npm:@playwright/mcp@0.0.86",
			Status: ApprovalApproved, RequestedAt: at, DecidedAt: at, Projects: []string{"/p"}},
		&Approval{ID: "x@1", CapabilityID: "x", Tier: TierArbitrary, Identity: "npm:x@1.0.0", Status: ApprovalPending, RequestedAt: at},
		&PersistedEvent{Seq: 7, At: at, Turn: 2, Event: Event{Type: EvToolResult, ToolUseID: "t", Output: "o", Truncated: true, OriginalBytes: 99}},
		&PersistedEvent{Seq: 8, At: at, Turn: 2, Event: Event{Type: EvTurnDiff, Diff: diff}},
		&PersistedEvent{Seq: 9, At: at, Turn: 2, Event: Event{Type: EvReleased, ReleaseReason: ReleaseExplicit, Outcome: OutcomeSuccess}},
		&ScopeConstraints{MaxPosture: PostureDefault, Backend: "script", MaxRounds: 2, AllowedTools: []string{"Read"}},
		&Error{Code: CodeConflict, Op: "read-turn", Field: "sessionId", Message: "busy", Retryable: true},
	}
}

func TestJSONRoundTrip(t *testing.T) {
	for _, v := range sampleValues() {
		t.Run(reflect.TypeOf(v).Elem().Name(), func(t *testing.T) {
			b, err := json.Marshal(v)
			require.NoError(t, err)
			back := reflect.New(reflect.TypeOf(v).Elem()).Interface()
			require.NoError(t, json.Unmarshal(b, back))
			assert.Equal(t, v, back)
		})
	}
}

func TestMsgpackRoundTrip(t *testing.T) {
	for _, v := range sampleValues() {
		t.Run(reflect.TypeOf(v).Elem().Name(), func(t *testing.T) {
			b, err := MarshalMsgpack(v)
			require.NoError(t, err)
			back := reflect.New(reflect.TypeOf(v).Elem()).Interface()
			require.NoError(t, UnmarshalMsgpack(b, back))
			assert.Equal(t, normalizeTimes(v), normalizeTimes(back))
		})
	}
}

// normalizeTimes strips the monotonic clock and location so times compare by
// instant after msgpack, which encodes UTC instants.
func normalizeTimes(v any) any {
	b, _ := json.Marshal(v)
	var m any
	_ = json.Unmarshal(b, &m)
	return m
}

func TestMsgpackGarbageIsTyped(t *testing.T) {
	var s Start
	err := UnmarshalMsgpack([]byte{0xc1, 0xff, 0x00}, &s)
	require.Error(t, err)
	assert.Equal(t, CodeInvalid, ErrorCode(err))
}

func FuzzMsgpackDecode(f *testing.F) {
	for _, v := range sampleValues() {
		b, _ := MarshalMsgpack(v)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r TurnResult
		if err := UnmarshalMsgpack(data, &r); err != nil {
			if ErrorCode(err) != CodeInvalid {
				t.Fatalf("decode error has code %q", ErrorCode(err))
			}
		}
		var e PersistedEvent
		_ = UnmarshalMsgpack(data, &e)
	})
}

func TestSessionIDs(t *testing.T) {
	a, b := NewSessionID(), NewSessionID()
	assert.NotEqual(t, a, b)
	assert.True(t, strings.HasPrefix(a, "cs_"))
	assert.Len(t, a, 3+64)
	assert.True(t, ValidSessionID(a))
	for _, bad := range []string{"", "cs_", "cs_../../etc", a[:len(a)-1], strings.ToUpper(a), "xx" + a[2:], a + "0", "cs_" + strings.Repeat("g", 64)} {
		assert.False(t, ValidSessionID(bad), bad)
	}
}

func TestPostureOrder(t *testing.T) {
	ps := Postures()
	for i := 1; i < len(ps); i++ {
		assert.True(t, ps[i].Above(ps[i-1]))
	}
	assert.False(t, Posture("").Valid())
	assert.Equal(t, PosturePlan, MinPosture(PostureFull, PosturePlan))
	p, err := ParsePosture("bypassPermissions")
	require.NoError(t, err)
	assert.Equal(t, PostureFull, p)
	_, err = ParsePosture("root")
	assert.Error(t, err)
}

func TestValidate(t *testing.T) {
	sid := NewSessionID()
	cases := []struct {
		name  string
		v     interface{ Validate() error }
		field string
		code  Code
	}{
		{"start ok", &Start{Brief: "x"}, "", ""},
		{"start no brief", &Start{Brief: "  "}, "brief", CodeInvalid},
		{"start bad posture", &Start{Brief: "x", MaxPosture: "root"}, "maxPosture", CodeInvalid},
		{"start initial above max", &Start{Brief: "x", MaxPosture: PosturePlan, InitialPosture: PostureFull}, "initialPosture", CodeCeilingExceeded},
		{"start empty tools", &Start{Brief: "x", AllowedTools: []string{}}, "allowedTools", CodeInvalid},
		{"start bad effort", &Start{Brief: "x", Effort: "ultra"}, "effort", CodeInvalid},
		{"start negative rounds", &Start{Brief: "x", MaxRounds: -1}, "maxRounds", CodeInvalid},
		{"start system prompt at the cap", &Start{Brief: "x", AppendSystemPrompt: strings.Repeat("a", MaxAppendSystemPromptBytes)}, "", ""},
		{"start system prompt past the cap (E2BIG)", &Start{Brief: "x", AppendSystemPrompt: strings.Repeat("a", MaxAppendSystemPromptBytes+1)}, "appendSystemPrompt", CodeInvalid},
		{"start system prompt with NUL", &Start{Brief: "x", AppendSystemPrompt: "a\x00b"}, "appendSystemPrompt", CodeInvalid},
		{"start brief with NUL", &Start{Brief: "a\x00b"}, "brief", CodeInvalid},
		{"start long model", &Start{Brief: "x", Model: strings.Repeat("m", MaxArgBytes+1)}, "agentModel", CodeInvalid},
		{"start long tool", &Start{Brief: "x", AllowedTools: []string{strings.Repeat("t", MaxArgBytes+1)}}, "allowedTools", CodeInvalid},
		{"read bad id", &ReadTurn{SessionID: "../x"}, "sessionId", CodeInvalid},
		{"answer ok", &Answer{SessionID: sid, ClarificationID: "c", Decision: DecisionAllowOnce}, "", ""},
		{"answer bad decision", &Answer{SessionID: sid, ClarificationID: "c", Decision: "yes"}, "decision", CodeInvalid},
		{"answer no id", &Answer{SessionID: sid, Decision: DecisionDeny}, "clarificationId", CodeInvalid},
		{"guide empty", &Guide{SessionID: sid}, "text", CodeInvalid},
		{"guide bad mode", &Guide{SessionID: sid, Text: "x", Mode: "shout"}, "mode", CodeInvalid},
		{"posture bad", &SetPosture{SessionID: sid, Posture: "x"}, "posture", CodeInvalid},
		{"interrupt ok", &Interrupt{SessionID: sid}, "", ""},
		{"stop bad outcome", &Stop{SessionID: sid, Outcome: "meh"}, "outcome", CodeInvalid},
		{"turn clarification without id", &TurnResult{Kind: KindClarification}, "clarificationId", CodeInvalid},
		{"turn error without message", &TurnResult{Kind: KindError}, "message", CodeInvalid},
		{"turn bad kind", &TurnResult{Kind: "done"}, "kind", CodeInvalid},
		{"constraints empty tools", &ScopeConstraints{AllowedTools: []string{}}, "allowedTools", CodeInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.v.Validate()
			if c.code == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			var e *Error
			require.True(t, errors.As(err, &e))
			assert.Equal(t, c.code, e.Code)
			assert.Equal(t, c.field, e.Field)
		})
	}
}

func TestErrorMatching(t *testing.T) {
	err := Errorf(CodeNotFound, OpStop, "no such session")
	assert.True(t, errors.Is(err, &Error{Code: CodeNotFound}))
	assert.False(t, errors.Is(err, &Error{Code: CodeConflict}))
	assert.Equal(t, CodeInternal, ErrorCode(errors.New("x")))
	assert.Equal(t, Code(""), ErrorCode(nil))
	assert.Equal(t, "stop: not_found: no such session", err.Error())
}

func TestCapBrief(t *testing.T) {
	s := strings.Repeat("é", TaskBriefMax)
	c := CapBrief(s)
	assert.LessOrEqual(t, len(c), TaskBriefMax)
	assert.True(t, strings.HasPrefix(s, c))
	assert.Equal(t, "short", CapBrief("short"))
}

func TestDurationJSON(t *testing.T) {
	var d Duration
	require.NoError(t, json.Unmarshal([]byte(`"1m30s"`), &d))
	assert.Equal(t, 90*time.Second, d.D())
	b, err := json.Marshal(d)
	require.NoError(t, err)
	assert.Equal(t, `"1m30s"`, string(b))
	assert.ErrorContains(t, json.Unmarshal([]byte(`90`), &d), "want a duration string")
	assert.ErrorContains(t, json.Unmarshal([]byte(`"soon"`), &d), `"soon" is not a duration`)
}

// A record with a provision decodes where the field is unknown (an older
// node), and an older record without one decodes with none.
func TestRecordProvisionIsCompatible(t *testing.T) {
	rec := SessionRecord{SessionID: NewSessionID(), BackendID: "b", Status: StatusIdle, Version: RecordVersion,
		Provision: &Provision{CapabilityIDs: []string{"x"}, Tiers: map[string]string{"x": TierSkill}}}
	b, err := MarshalMsgpack(&rec)
	require.NoError(t, err)
	type oldRecord struct {
		SessionID string `msgpack:"sessionId"`
		BackendID string `msgpack:"backendId"`
		Status    Status `msgpack:"status"`
	}
	var old oldRecord
	require.NoError(t, UnmarshalMsgpack(b, &old))
	require.Equal(t, rec.SessionID, old.SessionID)
	ob, err := MarshalMsgpack(&old)
	require.NoError(t, err)
	var back SessionRecord
	require.NoError(t, UnmarshalMsgpack(ob, &back))
	require.Nil(t, back.Provision)
	c := rec.Clone()
	c.Provision.Tiers["x"] = "changed"
	require.Equal(t, TierSkill, rec.Provision.Tiers["x"], "Clone copies the provision")
}
