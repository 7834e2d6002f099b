package script

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/codesession/codesession/messages"
	"github.com/codesession/codesession/transports"
)

var bg = context.Background()

func TestDescriptorAndProbe(t *testing.T) {
	tr := New()
	d := tr.Descriptor()
	assert.Equal(t, "script", d.ID)
	assert.Equal(t, "script (scripted test backend)", d.DisplayName)
	assert.True(t, d.Scripted)
	assert.Equal(t, "in-process scripted agent", d.ProcessModel)
	assert.Equal(t, "scenario file", d.Protocol)
	assert.Equal(t, messages.GranularityStream, d.Granularity)
	assert.True(t, d.ClarifySupport)
	assert.True(t, d.HonorsAllowed)
	assert.Equal(t, messages.ResumeNative, d.Resume)
	assert.Equal(t, messages.ModelPerTurn, d.ModelSelection)
	assert.Equal(t, messages.EffortPerTurn, d.EffortSupport)
	for _, e := range messages.Efforts() {
		assert.Equal(t, string(e), d.EffortMap[e])
	}
	for _, p := range messages.Postures() {
		assert.Equal(t, string(p), d.PostureMap[p])
	}
	assert.Equal(t, []string{"Write", "Edit"}, d.EditToolNames)
	assert.True(t, d.Live.Interrupt)
	assert.True(t, d.Live.SetPosture)
	for _, m := range []messages.GuideMode{messages.GuideSteer, messages.GuideQueue, messages.GuideInterrupt} {
		assert.True(t, d.SupportsGuideMode(m), m)
	}
	assert.Equal(t, messages.CostFree, d.Cost)
	assert.Contains(t, d.BriefingNotes, "never calls a model")

	a := tr.Probe(bg)
	assert.True(t, a.Available)
	assert.Equal(t, "script/1", a.Version)
	assert.False(t, a.CheckedAt.IsZero())
}

func TestTextThinkingAndTurnEnd(t *testing.T) {
	bubble(t, func(t *testing.T) {
		sc := mustParse(t, `{"turns":[
		  {"costUsd":0.5,"steps":[{"thinking":"hmm"},{"text":"hello"},{"text":"bye {{input}}"}]},
		  {"costUsd":0.25,"steps":[{"text":"two"}]}]}`)
		s, rec := openSession(t, New(WithScenario(sc)), transports.SessionSpec{Model: "m1"})
		play(t, s, 1, "now")
		play(t, s, 2, "again")

		all := rec.all()
		require.Equal(t, 0, all[0].turn)
		assert.Equal(t, messages.EvStarted, all[0].ev.Type)
		assert.True(t, strings.HasPrefix(all[0].ev.ExternalSessionID, "script-"), all[0].ev.ExternalSessionID)
		assert.Equal(t, "m1", all[0].ev.Model)

		assert.Equal(t, []string{
			`thinking "hmm"`,
			`text~ "he"`, `text~ "ll"`, `text~ "o"`, `text "hello"`,
			`text~ "bye"`, `text~ " n"`, `text~ "ow"`, `text "bye now"`,
			`turn_end completed "bye now" turns=1 cost=0.5 total=0.5 tokens=1/5`,
		}, rec.briefs(t, 1))
		assert.Equal(t, []string{
			`text~ "t"`, `text~ "w"`, `text~ "o"`, `text "two"`,
			`turn_end completed "two" turns=2 cost=0.25 total=0.75 tokens=2/1`,
		}, rec.briefs(t, 2))
		assert.Len(t, all, 1+10+5, "nothing but turn 0, 1 and 2 events")
	})
}

func TestToolStep(t *testing.T) {
	bubble(t, func(t *testing.T) {
		long := strings.Repeat("x", 40)
		sc := &Scenario{Turns: []Turn{{Steps: []Step{
			Tool("Bash", map[string]string{"command": "ls"}, "a b"),
			{Tool: &ToolStep{Name: "Grep", Output: long, IsError: true}},
		}}}}
		s, rec := openSession(t, New(WithScenario(sc), WithOutputCap(10)), transports.SessionSpec{})
		play(t, s, 7, "go")
		evs := rec.turn(t, 7)
		assert.Equal(t, []string{
			`tool_use toolu_script_1 Bash {"command":"ls"}`,
			`tool_result toolu_script_1 "a b"`,
			`tool_use toolu_script_2 Grep {}`,
			`tool_result toolu_script_2 ERROR truncated(40) "xxxxxxxxxx\n[output truncated: 10 of 40 bytes shown]"`,
			`turn_end completed "" turns=1 cost=0 total=0 tokens=1/0`,
		}, rec.briefs(t, 7))
		assert.Equal(t, 40, evs[3].OriginalBytes)
	})
}

func TestFileSteps(t *testing.T) {
	bubble(t, func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "old.txt"), []byte("bye"), 0o600))
		sc := &Scenario{Turns: []Turn{{Steps: []Step{
			Write("pkg/a.go", "package a\n\nvar X = 1\n"),
			Edit("pkg/a.go", "X = 1", "X = 2"),
			Write(filepath.Join(dir, "pkg", "a.go"), "package a\n\nvar X = 3\n"), // absolute inside
			Delete("old.txt"),
			Edit("pkg/a.go", "nope", "x"),
			Write("pkg/b.txt", "dup dup"),
			Edit("pkg/b.txt", "dup", "x"),
			Edit("missing.txt", "a", "b"),
			Delete("missing.txt"),
			Delete("pkg"),
			Write("pkg", "x"),
		}}}}
		s, rec := openSession(t, New(WithScenario(sc)), transports.SessionSpec{Cwd: dir})
		play(t, s, 1, "go")

		data, err := os.ReadFile(filepath.Join(dir, "pkg", "a.go"))
		require.NoError(t, err)
		assert.Equal(t, "package a\n\nvar X = 3\n", string(data))
		assert.NoFileExists(t, filepath.Join(dir, "old.txt"))
		data, err = os.ReadFile(filepath.Join(dir, "pkg", "b.txt"))
		require.NoError(t, err)
		assert.Equal(t, "dup dup", string(data), "an ambiguous edit changes nothing")

		evs := rec.turn(t, 1)
		var uses, results []messages.Event
		for _, ev := range evs {
			switch ev.Type {
			case messages.EvToolUse:
				uses = append(uses, ev)
			case messages.EvToolResult:
				results = append(results, ev)
			}
		}
		require.Len(t, uses, 11)
		require.Len(t, results, 11)
		aGo := filepath.Join(dir, "pkg", "a.go")
		assert.Equal(t, "Write", uses[0].ToolName)
		assert.JSONEq(t, `{"file_path":"`+aGo+`","content":"package a\n\nvar X = 1\n"}`, string(uses[0].Input))
		assert.Equal(t, "Edit", uses[1].ToolName)
		assert.JSONEq(t, `{"file_path":"`+aGo+`","old_string":"X = 1","new_string":"X = 2"}`, string(uses[1].Input))
		assert.Equal(t, "Bash", uses[3].ToolName)
		assert.Contains(t, string(uses[3].Input), `rm -v -- '`+filepath.Join(dir, "old.txt")+`'`)

		for i, want := range []struct {
			isErr bool
			out   string
		}{
			{false, "File created successfully at: " + aGo},
			{false, "The file " + aGo + " has been edited."},
			{false, "The file " + aGo + " has been updated."},
			{false, "removed '" + filepath.Join(dir, "old.txt") + "'"},
			{true, "edit failed: the old string was not found in " + aGo},
			{false, "File created successfully at: "},
			{true, "edit failed: the old string occurs 2 times in"},
			{true, "edit failed: " + filepath.Join(dir, "missing.txt") + " does not exist"},
			{true, "No such file or directory"},
			{true, "Is a directory"},
			{true, "is a directory"},
		} {
			assert.Equal(t, want.isErr, results[i].IsError, "result %d: %s", i, results[i].Output)
			assert.Contains(t, results[i].Output, want.out, "result %d", i)
			assert.Equal(t, uses[i].ToolUseID, results[i].ToolUseID)
		}
		assert.Equal(t, messages.TurnCompleted, last(t, evs).State, "failed file steps do not end the turn")
	})
}

func TestFileStepsRefuseEscapes(t *testing.T) {
	// The workspace is root/ws; root/outside holds victim.txt.
	for _, tc := range []struct {
		name string
		path func(ws string) string
		step func(p string) Step
	}{
		{"write dotdot", rel("../outside/victim.txt"), func(p string) Step { return Write(p, "pwned") }},
		{"write nested dotdot", rel("a/../../outside/victim.txt"), func(p string) Step { return Write(p, "pwned") }},
		{"write absolute outside", abs("../outside/victim.txt"), func(p string) Step { return Write(p, "pwned") }},
		{"write through symlinked dir", rel("link/victim.txt"), func(p string) Step { return Write(p, "pwned") }},
		{"write new file through symlinked dir", rel("link/new.txt"), func(p string) Step { return Write(p, "pwned") }},
		{"write to symlinked file", rel("filelink"), func(p string) Step { return Write(p, "pwned") }},
		{"write through dangling symlink", rel("dangling"), func(p string) Step { return Write(p, "pwned") }},
		{"edit dotdot", rel("../outside/victim.txt"), func(p string) Step { return Edit(p, "original", "pwned") }},
		{"edit through symlinked dir", rel("link/victim.txt"), func(p string) Step { return Edit(p, "original", "pwned") }},
		{"edit absolute outside", abs("../outside/victim.txt"), func(p string) Step { return Edit(p, "original", "pwned") }},
		{"delete dotdot", rel("../outside/victim.txt"), func(p string) Step { return Delete(p) }},
		{"delete absolute outside", abs("../outside/victim.txt"), func(p string) Step { return Delete(p) }},
		{"delete through symlinked dir", rel("link/victim.txt"), func(p string) Step { return Delete(p) }},
		{"delete the workspace", abs("."), func(p string) Step { return Delete(p) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				root := t.TempDir()
				outside := filepath.Join(root, "outside")
				require.NoError(t, os.Mkdir(outside, 0o755))
				victim := filepath.Join(outside, "victim.txt")
				require.NoError(t, os.WriteFile(victim, []byte("original"), 0o644))
				ws := filepath.Join(root, "ws")
				require.NoError(t, os.Mkdir(ws, 0o755))
				require.NoError(t, os.Symlink(outside, filepath.Join(ws, "link")))
				require.NoError(t, os.Symlink(victim, filepath.Join(ws, "filelink")))
				require.NoError(t, os.Symlink(filepath.Join(outside, "ghost.txt"), filepath.Join(ws, "dangling")))

				sc := &Scenario{Turns: []Turn{{Steps: []Step{tc.step(tc.path(ws))}}}}
				s, rec := openSession(t, New(WithScenario(sc)), transports.SessionSpec{Cwd: ws, Posture: messages.PostureFull})
				play(t, s, 1, "go")

				res := find(t, rec.turn(t, 1), messages.EvToolResult)
				assert.True(t, res.IsError)
				assert.Contains(t, res.Output, "refused: path")
				data, err := os.ReadFile(victim)
				require.NoError(t, err, "the file outside is still there")
				assert.Equal(t, "original", string(data))
				assert.NoFileExists(t, filepath.Join(outside, "new.txt"))
				assert.NoFileExists(t, filepath.Join(outside, "ghost.txt"))
				assert.DirExists(t, ws)
			})
		})
	}
}

func rel(p string) func(string) string { return func(string) string { return p } }
func abs(p string) func(string) string {
	return func(ws string) string { return filepath.Join(ws, p) }
}

func TestFileStepsFollowInsideSymlinks(t *testing.T) {
	bubble(t, func(t *testing.T) {
		root := t.TempDir()
		real := filepath.Join(root, "real")
		require.NoError(t, os.MkdirAll(filepath.Join(real, "sub"), 0o755))
		ws := filepath.Join(root, "ws") // the workspace itself is reached through a symlink
		require.NoError(t, os.Symlink(real, ws))
		require.NoError(t, os.Symlink("sub", filepath.Join(real, "alias")))
		sc := &Scenario{Turns: []Turn{{Steps: []Step{
			Write("alias/a.txt", "1"),
			Write(filepath.Join(ws, "b.txt"), "2"),   // absolute, as given
			Write(filepath.Join(real, "c.txt"), "3"), // absolute, real path
			Delete("alias"),                          // removes the link, not its target
		}}}}
		s, rec := openSession(t, New(WithScenario(sc)), transports.SessionSpec{Cwd: ws})
		play(t, s, 1, "go")
		for _, ev := range rec.turn(t, 1) {
			if ev.Type == messages.EvToolResult {
				assert.False(t, ev.IsError, ev.Output)
			}
		}
		assert.FileExists(t, filepath.Join(real, "sub", "a.txt"))
		assert.FileExists(t, filepath.Join(real, "b.txt"))
		assert.FileExists(t, filepath.Join(real, "c.txt"))
		assert.NoFileExists(t, filepath.Join(real, "alias"))
		assert.DirExists(t, filepath.Join(real, "sub"))
	})
}

func TestFileStepsWithoutCwd(t *testing.T) {
	bubble(t, func(t *testing.T) {
		sc := &Scenario{Turns: []Turn{{Steps: []Step{Write("a.txt", "x")}}}}
		s, rec := openSession(t, New(WithScenario(sc)), transports.SessionSpec{})
		play(t, s, 1, "go")
		res := find(t, rec.turn(t, 1), messages.EvToolResult)
		assert.True(t, res.IsError)
		assert.Equal(t, refusedNoCwd, res.Output)
		assert.NoFileExists(t, "a.txt")
	})
}

// askScenario asks for a Bash call, then for another Bash call, then writes.
func askScenario() *Scenario {
	return &Scenario{Turns: []Turn{
		{Steps: []Step{
			Tool("Bash", map[string]string{"command": "go vet ./..."}, "vet ok").Asking(),
			Text("after first"),
			Tool("Bash", map[string]string{"command": "go test ./..."}, "test ok").Asking(),
			Text("done"),
		}},
		{Steps: []Step{Tool("Bash", nil, "third").Asking(), Text("turn 2 done")}},
	}}
}

func TestClarificationAllowOnce(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, rec := openSession(t, New(WithScenario(askScenario())), transports.SessionSpec{})
		play(t, s, 1, "go")
		evs := rec.turn(t, 1)
		assert.Equal(t, []string{"tool_use", "clarification"}, types(evs), "the turn blocks on the clarification")
		c := last(t, evs)
		assert.Equal(t, "Bash", c.ToolName)
		assert.JSONEq(t, `{"command":"go vet ./..."}`, string(c.Input))
		id1 := c.ClarificationID

		require.NoError(t, s.Answer(bg, id1, messages.DecisionAllowOnce, ""))
		synctest.Wait()
		id2 := clarificationID(t, rec.turn(t, 1))
		assert.NotEqual(t, id1, id2, "allow_once asks again for the next call")
		require.NoError(t, s.Answer(bg, id2, messages.DecisionAllowOnce, ""))
		synctest.Wait()

		lines := rec.briefs(t, 1)
		assert.Contains(t, lines, `tool_result toolu_script_1 "vet ok"`)
		assert.Contains(t, lines, `tool_result toolu_script_2 "test ok"`)
		assert.Equal(t, messages.TurnCompleted, last(t, rec.turn(t, 1)).State)

		err := s.Answer(bg, id1, messages.DecisionAllowOnce, "")
		requireCode(t, err, messages.CodeConflict, "not pending")
	})
}

func TestClarificationAllowSession(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, rec := openSession(t, New(WithScenario(askScenario())), transports.SessionSpec{})
		play(t, s, 1, "go")
		require.NoError(t, s.Answer(bg, clarificationID(t, rec.turn(t, 1)), messages.DecisionAllowSession, ""))
		synctest.Wait()
		evs := rec.turn(t, 1)
		assert.Equal(t, 1, countType(evs, messages.EvClarification), "the second Bash call is allowed for the session")
		assert.Equal(t, messages.TurnCompleted, last(t, evs).State)

		play(t, s, 2, "again")
		evs = rec.turn(t, 2)
		assert.Equal(t, 0, countType(evs, messages.EvClarification), "and in later turns")
		assert.Equal(t, "turn 2 done", last(t, evs).Text)
	})
}

func TestClarificationDeny(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, rec := openSession(t, New(WithScenario(askScenario())), transports.SessionSpec{})
		play(t, s, 1, "go")
		require.NoError(t, s.Answer(bg, clarificationID(t, rec.turn(t, 1)), messages.DecisionDeny, "not now"))
		synctest.Wait()
		lines := rec.briefs(t, 1)
		assert.Equal(t, `tool_result toolu_script_1 ERROR "denied: not now"`, lines[2])
		assert.Contains(t, lines, `text "after first"`, "the turn goes on after a deny")
		require.NoError(t, s.Answer(bg, clarificationID(t, rec.turn(t, 1)), messages.DecisionDeny, ""))
		synctest.Wait()
		lines = rec.briefs(t, 1)
		assert.Contains(t, lines, `tool_result toolu_script_2 ERROR "denied: no reason given"`)
		assert.Equal(t, messages.TurnCompleted, last(t, rec.turn(t, 1)).State)
	})
}

func TestClarificationCancel(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, rec := openSession(t, New(WithScenario(askScenario())), transports.SessionSpec{})
		play(t, s, 1, "go")
		require.NoError(t, s.Answer(bg, clarificationID(t, rec.turn(t, 1)), messages.DecisionCancel, ""))
		synctest.Wait()
		evs := rec.turn(t, 1)
		assert.Equal(t, []string{"tool_use", "clarification", "tool_result", "turn_end"}, types(evs))
		assert.True(t, evs[2].IsError)
		assert.Equal(t, messages.TurnInterrupted, evs[3].State)

		// The session goes on with the next scenario turn.
		play(t, s, 2, "next")
		assert.Equal(t, "clarification", string(last(t, rec.turn(t, 2)).Type))
	})
}

func TestAnswerErrors(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, rec := openSession(t, New(WithScenario(askScenario())), transports.SessionSpec{})
		requireCode(t, s.Answer(bg, "clar-nope", messages.DecisionAllowOnce, ""), messages.CodeNotFound)
		play(t, s, 1, "go")
		id := clarificationID(t, rec.turn(t, 1))
		requireCode(t, s.Answer(bg, "clar-nope", messages.DecisionAllowOnce, ""), messages.CodeNotFound)
		requireCode(t, s.Answer(bg, id, messages.Decision("maybe"), ""), messages.CodeInvalid)
		require.NoError(t, s.Answer(bg, id, messages.DecisionAllowOnce, ""))
		requireCode(t, s.Answer(bg, id, messages.DecisionAllowOnce, ""), messages.CodeConflict)
		synctest.Wait()
	})
}

func TestPosture(t *testing.T) {
	steps := []Step{
		Write("a.txt", "a").Asking(),
		Tool("Bash", nil, "ran").Asking(),
		Tool("Read", nil, "read"),
		Delete("a.txt").Asking(),
	}
	for _, tc := range []struct {
		posture messages.Posture
		want    []string // per call: "ask", "ran" or "refused"
	}{
		{messages.PosturePlan, []string{"refused", "refused", "refused", "refused"}},
		{messages.PostureDefault, []string{"ask", "ask", "ran", "ask"}},
		{messages.PostureAcceptEdits, []string{"ran", "ask", "ran", "ran"}},
		{messages.PostureFull, []string{"ran", "ran", "ran", "ran"}},
	} {
		t.Run(string(tc.posture), func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				dir := t.TempDir()
				s, rec := openSession(t, New(WithScenario(&Scenario{Turns: []Turn{{Steps: steps}}})),
					transports.SessionSpec{Cwd: dir, Posture: tc.posture})
				play(t, s, 1, "go")
				var got []string
				for {
					evs := rec.turn(t, 1)
					ev := last(t, evs)
					if ev.Type == messages.EvClarification {
						got = append(got, "ask")
						require.NoError(t, s.Answer(bg, ev.ClarificationID, messages.DecisionAllowOnce, ""))
						synctest.Wait()
						continue
					}
					require.Equal(t, messages.EvTurnEnd, ev.Type)
					break
				}
				// Fold the results in: every call either asked (then ran) or did not.
				var calls []string
				asked := 0
				for i, ev := range rec.turn(t, 1) {
					if ev.Type != messages.EvToolResult {
						continue
					}
					prev := rec.turn(t, 1)[i-1]
					switch {
					case ev.IsError && ev.Output == refusedPlan:
						calls = append(calls, "refused")
					case prev.Type == messages.EvClarification:
						calls = append(calls, "ask")
						asked++
					default:
						require.False(t, ev.IsError, ev.Output)
						calls = append(calls, "ran")
					}
				}
				assert.Equal(t, tc.want, calls)
				assert.Equal(t, asked, len(got))
				if tc.posture == messages.PosturePlan {
					assert.Equal(t, 0, countType(rec.turn(t, 1), messages.EvClarification))
					assert.NoFileExists(t, filepath.Join(dir, "a.txt"))
				}
			})
		})
	}
}

func TestSetPostureTakesEffectForLaterSteps(t *testing.T) {
	bubble(t, func(t *testing.T) {
		dir := t.TempDir()
		sc := &Scenario{Turns: []Turn{{Steps: []Step{
			Text("{{posture}}"), Delay(time.Second), Write("a.txt", "a").Asking(), Text("{{posture}}"),
		}}}}
		s, rec := openSession(t, New(WithScenario(sc)), transports.SessionSpec{Cwd: dir, Posture: messages.PosturePlan})
		play(t, s, 1, "go")
		ps := s.(transports.PostureSetter)
		require.NoError(t, ps.SetPosture(bg, messages.PostureAcceptEdits))
		requireCode(t, ps.SetPosture(bg, messages.Posture("yolo")), messages.CodeInvalid)
		time.Sleep(time.Second)
		synctest.Wait()
		evs := rec.turn(t, 1)
		assert.Equal(t, "plan", evs[3].Text)
		assert.Equal(t, 0, countType(evs, messages.EvClarification))
		assert.FileExists(t, filepath.Join(dir, "a.txt"))
		assert.Equal(t, "acceptEdits", last(t, evs).Text)
	})
}

func TestSetModel(t *testing.T) {
	bubble(t, func(t *testing.T) {
		sc := &Scenario{Fallback: &Turn{Steps: []Step{Text("{{model}}/{{effort}}")}}}
		s, rec := openSession(t, New(WithScenario(sc)), transports.SessionSpec{Model: "a", Effort: messages.EffortLow})
		play(t, s, 1, "x")
		ms := s.(transports.ModelSetter)
		require.NoError(t, ms.SetModel(bg, "b", messages.EffortMax))
		play(t, s, 2, "x")
		require.NoError(t, ms.SetModel(bg, "", ""))
		play(t, s, 3, "x")
		requireCode(t, ms.SetModel(bg, "c", messages.Effort("huge")), messages.CodeInvalid)
		assert.Equal(t, "a/low", last(t, rec.turn(t, 1)).Text)
		assert.Equal(t, "b/max", last(t, rec.turn(t, 2)).Text)
		assert.Equal(t, "b/max", last(t, rec.turn(t, 3)).Text, "empty values keep the current ones")
	})
}

func TestInterruptDuringDelay(t *testing.T) {
	bubble(t, func(t *testing.T) {
		sc := &Scenario{Turns: []Turn{
			{Steps: []Step{Text("working"), Delay(10 * time.Minute), Text("never")}},
			{Steps: []Step{Text("next")}},
		}}
		s, rec := openSession(t, New(WithScenario(sc)), transports.SessionSpec{})
		start := time.Now()
		play(t, s, 1, "go")
		in := s.(transports.Interrupter)
		require.NoError(t, in.Interrupt(bg))
		synctest.Wait()
		assert.Zero(t, time.Since(start), "the delay was cut short")
		end := last(t, rec.turn(t, 1))
		assert.Equal(t, messages.EvTurnEnd, end.Type)
		assert.Equal(t, messages.TurnInterrupted, end.State)
		assert.Equal(t, "working", end.Text)
		assert.NotContains(t, rec.briefs(t, 1), `text "never"`)

		require.NoError(t, in.Interrupt(bg), "no running turn: a no-op")
		play(t, s, 2, "go on")
		assert.Equal(t, messages.TurnCompleted, last(t, rec.turn(t, 2)).State)
		assert.Equal(t, 2, last(t, rec.turn(t, 2)).NumTurns)
	})
}

func TestInterruptDuringClarification(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, rec := openSession(t, New(WithScenario(askScenario())), transports.SessionSpec{})
		play(t, s, 1, "go")
		id := clarificationID(t, rec.turn(t, 1))
		require.NoError(t, s.(transports.Interrupter).Interrupt(bg))
		synctest.Wait()
		evs := rec.turn(t, 1)
		assert.Equal(t, []string{"tool_use", "clarification", "tool_result", "turn_end"}, types(evs))
		assert.True(t, evs[2].IsError)
		assert.Equal(t, messages.TurnInterrupted, evs[3].State)
		requireCode(t, s.Answer(bg, id, messages.DecisionAllowOnce, ""), messages.CodeConflict)
	})
}

func TestInterruptBeforeTheTurnStarts(t *testing.T) {
	bubble(t, func(t *testing.T) {
		// The session's goroutine is held in its started event, so it
		// cannot take the turn before the interrupt fires: without the
		// gate it may run the whole turn first on a busy machine.
		gate := make(chan struct{})
		rec := &recorder{onEvent: func(_ int, ev messages.Event) {
			if ev.Type == messages.EvStarted {
				<-gate
			}
		}}
		s := openRecorded(t, New(), transports.SessionSpec{}, rec)
		require.NoError(t, s.StartTurn(bg, 1, "x"))
		require.NoError(t, s.(transports.Interrupter).Interrupt(bg))
		close(gate)
		synctest.Wait()
		assert.Equal(t, []string{`turn_end interrupted "" turns=1 cost=0 total=0 tokens=1/0`}, rec.briefs(t, 1))
	})
}

func TestSteer(t *testing.T) {
	bubble(t, func(t *testing.T) {
		sc := &Scenario{Turns: []Turn{
			{Steps: []Step{Text("a"), Delay(time.Second), Text("b")}},
			{Steps: []Step{Delay(time.Second), Text("c")}},
		}}
		s, rec := openSession(t, New(WithScenario(sc)), transports.SessionSpec{})
		st := s.(transports.Steerer)
		requireCode(t, st.Steer(bg, "early"), messages.CodeNotLive)

		play(t, s, 1, "go")
		require.NoError(t, st.Steer(bg, "focus on tests"))
		require.NoError(t, st.Steer(bg, "and docs"))
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, []string{
			`text~ "a"`, `text "a"`,
			`text "[steer] focus on tests"`, `text "[steer] and docs"`,
			`text~ "b"`, `text "b"`,
			`turn_end completed "b" turns=1 cost=0 total=0 tokens=1/2`,
		}, rec.briefs(t, 1), "steering arrives at the next step boundary and is not the turn's text")

		// Steering that the turn never reaches is reported, not lost silently.
		play(t, s, 2, "go")
		require.NoError(t, st.Steer(bg, "too late"))
		require.NoError(t, s.(transports.Interrupter).Interrupt(bg))
		synctest.Wait()
		lines := rec.briefs(t, 2)
		assert.True(t, hasPrefix(lines, `warning "steering not delivered: turn 2 closed first: too late"`), lines)
		assert.Equal(t, messages.TurnInterrupted, last(t, rec.turn(t, 2)).State)
		requireCode(t, st.Steer(bg, "idle"), messages.CodeNotLive)
	})
}

func TestFail(t *testing.T) {
	bubble(t, func(t *testing.T) {
		sc := &Scenario{Turns: []Turn{
			{CostUSD: 0.1, Steps: []Step{Text("trying"), Fail("compile error")}},
			{Steps: []Step{Text("recovered")}},
		}}
		s, rec := openSession(t, New(WithScenario(sc)), transports.SessionSpec{})
		play(t, s, 1, "go")
		assert.Equal(t, []string{
			`text~ "tr"`, `text~ "yi"`, `text~ "ng"`, `text "trying"`,
			`error "compile error"`,
			`turn_end error "compile error" turns=1 cost=0.1 total=0.1 tokens=1/2`,
		}, rec.briefs(t, 1))
		play(t, s, 2, "again")
		assert.Equal(t, messages.TurnCompleted, last(t, rec.turn(t, 2)).State)
	})
}

func TestCrash(t *testing.T) {
	bubble(t, func(t *testing.T) {
		sc := &Scenario{Turns: []Turn{{Steps: []Step{Text("hi"), Crash("segfault")}}}}
		s, rec := openSession(t, New(WithScenario(sc)), transports.SessionSpec{})
		play(t, s, 1, "go")
		evs := rec.turn(t, 1)
		ev := last(t, evs)
		assert.Equal(t, messages.EvError, ev.Type)
		assert.True(t, ev.Fatal)
		assert.Equal(t, "segfault", ev.Text)
		assert.Equal(t, 0, countType(evs, messages.EvTurnEnd))

		requireCode(t, s.StartTurn(bg, 2, "again"), messages.CodeInternal, "backend exited")
		requireCode(t, s.(transports.Steerer).Steer(bg, "x"), messages.CodeInternal, "backend exited")
		require.NoError(t, s.(transports.Interrupter).Interrupt(bg))
		require.NoError(t, s.Close(bg))
		requireCode(t, s.StartTurn(bg, 2, "again"), messages.CodeNotLive, "closed")
	})
}

func TestEnd(t *testing.T) {
	bubble(t, func(t *testing.T) {
		sc := &Scenario{Turns: []Turn{{Steps: []Step{Text("all done"), End("goodbye")}}}}
		s, rec := openSession(t, New(WithScenario(sc)), transports.SessionSpec{})
		play(t, s, 1, "go")
		evs := rec.turn(t, 1)
		assert.Equal(t, `ended "goodbye"`, brief(last(t, evs)))
		assert.Equal(t, 0, countType(evs, messages.EvTurnEnd))
		requireCode(t, s.StartTurn(bg, 2, "more"), messages.CodeNotLive, "ended the session")
	})
}

func TestMatchingAndExhaustion(t *testing.T) {
	bubble(t, func(t *testing.T) {
		sc := mustParse(t, `{"turns":[
		  {"steps":[{"text":"first"}]},
		  {"match":"test","steps":[{"text":"testing"}]},
		  {"steps":[{"text":"second"}]}]}`)
		s, rec := openSession(t, New(WithScenario(sc)), transports.SessionSpec{})
		for i, in := range []string{"write tests", "hello", "test again", "x", "y"} {
			play(t, s, i+1, in)
		}
		var got []string
		for i := 1; i <= 5; i++ {
			got = append(got, last(t, rec.turn(t, i)).Text)
		}
		assert.Equal(t, []string{"testing", "first", "second", ReplyExhausted, ReplyExhausted}, got)
	})
}

func TestFallbackAndEcho(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, rec := openSession(t, New(), transports.SessionSpec{})
		play(t, s, 1, "hello there")
		play(t, s, 2, "again")
		assert.Equal(t, "Scripted reply to turn 1: hello there", last(t, rec.turn(t, 1)).Text)
		assert.Equal(t, "Scripted reply to turn 2: again", last(t, rec.turn(t, 2)).Text)
	})
}

func TestStartTurnErrors(t *testing.T) {
	bubble(t, func(t *testing.T) {
		sc := &Scenario{Turns: []Turn{{Steps: []Step{Delay(time.Second)}}}}
		s, rec := openSession(t, New(WithScenario(sc)), transports.SessionSpec{})
		requireCode(t, s.StartTurn(bg, 0, "x"), messages.CodeInvalid)
		play(t, s, 1, "go")
		requireCode(t, s.StartTurn(bg, 2, "x"), messages.CodeConflict, "still running")
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, messages.TurnCompleted, last(t, rec.turn(t, 1)).State)
		play(t, s, 2, "x")
		assert.Equal(t, ReplyExhausted, last(t, rec.turn(t, 2)).Text)
	})
}

// TestStartTurnFromTheSink starts the next turn and answers clarifications
// from inside the sink, as a host reacting to events may.
func TestStartTurnFromTheSink(t *testing.T) {
	bubble(t, func(t *testing.T) {
		rec := &recorder{}
		var s transports.Session
		errs := make(chan error, 10)
		rec.onEvent = func(turn int, ev messages.Event) {
			switch {
			case ev.Type == messages.EvClarification:
				errs <- s.Answer(bg, ev.ClarificationID, messages.DecisionAllowOnce, "")
			case ev.Type == messages.EvTurnEnd && turn < 3:
				errs <- s.StartTurn(bg, turn+1, "next")
			}
		}
		var err error
		s, err = New(WithScenario(askScenario())).Open(bg, transports.SessionSpec{}, rec.sink)
		require.NoError(t, err)
		require.NoError(t, s.StartTurn(bg, 1, "go"))
		synctest.Wait()
		require.NoError(t, s.Close(bg))
		close(errs)
		n := 0
		for err := range errs {
			require.NoError(t, err)
			n++
		}
		assert.Equal(t, 5, n, "3 answers and 2 starts")
		for i := 1; i <= 3; i++ {
			assert.Equal(t, messages.TurnCompleted, last(t, rec.turn(t, i)).State, "turn %d", i)
		}
	})
}

func TestCloseStopsEverything(t *testing.T) {
	bubble(t, func(t *testing.T) {
		sc := &Scenario{Turns: []Turn{{Steps: []Step{Text("a"), Delay(time.Hour), Text("b")}}}}
		rec := &recorder{}
		s, err := New(WithScenario(sc)).Open(bg, transports.SessionSpec{}, rec.sink)
		require.NoError(t, err)
		play(t, s, 1, "go")
		before := len(rec.all())
		require.NoError(t, s.Close(bg))
		rec.markClosed()
		require.NoError(t, s.Close(bg), "Close is idempotent")
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		assert.Equal(t, 0, rec.lateCalls())
		assert.Len(t, rec.all(), before, "no event after Close, not even a turn end")

		requireCode(t, s.StartTurn(bg, 2, "x"), messages.CodeNotLive)
		requireCode(t, s.(transports.Steerer).Steer(bg, "x"), messages.CodeNotLive)
		requireCode(t, s.(transports.ModelSetter).SetModel(bg, "m", ""), messages.CodeNotLive)
		requireCode(t, s.(transports.PostureSetter).SetPosture(bg, messages.PostureFull), messages.CodeNotLive)
		requireCode(t, s.Answer(bg, "x", messages.DecisionDeny, ""), messages.CodeNotLive)
		require.NoError(t, s.(transports.Interrupter).Interrupt(bg))
	})
}

func TestCloseHonoursContext(t *testing.T) {
	bubble(t, func(t *testing.T) {
		release := make(chan struct{})
		rec := &recorder{}
		blocked := false
		rec.onEvent = func(turn int, ev messages.Event) {
			if ev.Type == messages.EvText && ev.Delta && !blocked {
				blocked = true
				<-release // a sink stuck in its first call of the turn
			}
		}
		sc := &Scenario{Turns: []Turn{{Steps: []Step{Text("stuck"), Text("never")}}}}
		s, err := New(WithScenario(sc)).Open(bg, transports.SessionSpec{}, rec.sink)
		require.NoError(t, err)
		play(t, s, 1, "go")
		require.Equal(t, []string{`text~ "st"`}, rec.briefs(t, 1))

		// From here on, any sink call but the one in flight is late.
		rec.markClosed()
		ctx, cancel := context.WithTimeout(bg, time.Second)
		defer cancel()
		requireCode(t, s.Close(ctx), messages.CodeTimeout)
		close(release)
		require.NoError(t, s.Close(bg))
		synctest.Wait()
		assert.Equal(t, 0, rec.lateCalls(), "no sink call starts once Close was called: %v", rec.briefs(t, 1))
		assert.Equal(t, []string{`text~ "st"`}, rec.briefs(t, 1))
	})
}

func TestCloseRightAfterOpen(t *testing.T) {
	bubble(t, func(t *testing.T) {
		rec := &recorder{}
		s, err := New().Open(bg, transports.SessionSpec{}, rec.sink)
		require.NoError(t, err)
		require.NoError(t, s.Close(bg))
		rec.markClosed()
		synctest.Wait()
		assert.Equal(t, 0, rec.lateCalls())
		assert.LessOrEqual(t, len(rec.all()), 1, "at most the started event")
	})
}

func TestOpenScenarioSelection(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"turns":[{"steps":[{"text":"from file"}]}]}`), 0o644))
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"turns":[{"steps":[{"text":"a","tool":{"name":"x"}}]}]}`), 0o644))
	defaultSc := &Scenario{Turns: []Turn{{Steps: []Step{Text("from option")}}}}

	for _, tc := range []struct {
		name string
		env  []string
		opt  *Scenario
		want string
	}{
		{"env file", []string{"CODESESSION_SCRIPT=" + good}, defaultSc, "from file"},
		{"env file relative to cwd", []string{"OTHER=1", "CODESESSION_SCRIPT=good.json"}, nil, "from file"},
		{"last value wins", []string{"CODESESSION_SCRIPT=" + bad, "CODESESSION_SCRIPT=" + good}, nil, "from file"},
		{"option", nil, defaultSc, "from option"},
		{"empty env value", []string{"CODESESSION_SCRIPT="}, defaultSc, "from option"},
		{"builtin echo", []string{"CODESESSION_SCRIPT=builtin:echo"}, defaultSc, "Scripted reply to turn 1: hi"},
		{"builtin demo", []string{"CODESESSION_SCRIPT=builtin:demo"}, nil, "I'll add a small `greet` package and a README line."},
		{"default", nil, nil, "Scripted reply to turn 1: hi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				ws := t.TempDir()
				if tc.name == "env file relative to cwd" {
					data, err := os.ReadFile(good)
					require.NoError(t, err)
					require.NoError(t, os.WriteFile(filepath.Join(ws, "good.json"), data, 0o644))
				}
				var opts []Option
				if tc.opt != nil {
					opts = append(opts, WithScenario(tc.opt))
				}
				s, rec := openSession(t, New(append(opts, WithDelayScale(0))...), transports.SessionSpec{Env: tc.env, Cwd: ws})
				require.NoError(t, s.StartTurn(bg, 1, "hi"))
				synctest.Wait()
				var texts []string
				for _, ev := range rec.turn(t, 1) {
					if ev.Type == messages.EvText && !ev.Delta {
						texts = append(texts, ev.Text)
					}
				}
				require.NotEmpty(t, texts)
				assert.Equal(t, tc.want, texts[0])
			})
		})
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"turns":[{"steps":[{"text":"a","tool":{"name":"x"}}]}]}`), 0o644))
	sink := func(int, messages.Event) {}
	tr := New()

	_, err := tr.Open(bg, transports.SessionSpec{Env: []string{"CODESESSION_SCRIPT=" + bad}}, sink)
	requireCode(t, err, messages.CodeInvalid, bad, "turns[0].steps[0]", "2 actions (text, tool)")
	var e *messages.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, messages.OpStart, e.Op)
	assert.Equal(t, "env.CODESESSION_SCRIPT", e.Field)

	_, err = tr.Open(bg, transports.SessionSpec{Env: []string{"CODESESSION_SCRIPT=" + filepath.Join(dir, "nope.json")}}, sink)
	requireCode(t, err, messages.CodeInvalid, "nope.json", "cannot open")

	_, err = New(WithScenario(&Scenario{Turns: []Turn{{Steps: []Step{{}}}}})).Open(bg, transports.SessionSpec{}, sink)
	requireCode(t, err, messages.CodeInvalid, "turns[0].steps[0]")

	_, err = tr.Open(bg, transports.SessionSpec{}, nil)
	requireCode(t, err, messages.CodeInvalid, "sink")
	_, err = tr.Open(bg, transports.SessionSpec{Posture: "yolo"}, sink)
	requireCode(t, err, messages.CodeInvalid, "posture")
	_, err = tr.Open(bg, transports.SessionSpec{Effort: "huge"}, sink)
	requireCode(t, err, messages.CodeInvalid, "effort")
	_, err = tr.Open(bg, transports.SessionSpec{Cwd: filepath.Join(dir, "missing")}, sink)
	requireCode(t, err, messages.CodeInvalid, "cwd")
	_, err = tr.Open(bg, transports.SessionSpec{Cwd: bad}, sink)
	requireCode(t, err, messages.CodeInvalid, "not a directory")
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err = tr.Open(ctx, transports.SessionSpec{}, sink)
	requireCode(t, err, messages.CodeTimeout)
}

func TestResume(t *testing.T) {
	bubble(t, func(t *testing.T) {
		_, rec := openSession(t, New(), transports.SessionSpec{ResumeExternalID: "script-abc", Model: "m"})
		synctest.Wait()
		assert.Equal(t, []string{"started ext=script-abc model=m"}, rec.briefs(t, 0))
	})
}

func TestAllowedTools(t *testing.T) {
	bubble(t, func(t *testing.T) {
		dir := t.TempDir()
		sc := &Scenario{Turns: []Turn{{Steps: []Step{Tool("Bash", nil, "x"), Write("a.txt", "a")}}}}
		s, rec := openSession(t, New(WithScenario(sc)), transports.SessionSpec{Cwd: dir, AllowedTools: []string{"Write"}})
		play(t, s, 1, "go")
		lines := rec.briefs(t, 1)
		assert.Contains(t, lines, `tool_result toolu_script_1 ERROR "refused: tool \"Bash\" is not in this session's allowed tools"`)
		assert.FileExists(t, filepath.Join(dir, "a.txt"))
	})
}

func TestSessionsAreIndependent(t *testing.T) {
	bubble(t, func(t *testing.T) {
		tr := New(WithScenario(&Scenario{Turns: []Turn{{Steps: []Step{Text("once")}}}}))
		s1, r1 := openSession(t, tr, transports.SessionSpec{})
		s2, r2 := openSession(t, tr, transports.SessionSpec{})
		play(t, s1, 1, "x")
		play(t, s2, 1, "x")
		assert.Equal(t, "once", last(t, r1.turn(t, 1)).Text)
		assert.Equal(t, "once", last(t, r2.turn(t, 1)).Text, "each session has its own place in the scenario")
		assert.NotEqual(t, r1.all()[0].ev.ExternalSessionID, r2.all()[0].ev.ExternalSessionID)
	})
}
