// Package script is the "script" backend: a deterministic scripted agent
// for tests, the demo and the benchmarks. It never calls a model; it
// replays a Scenario, and it is labelled as scripted wherever it appears
// (Descriptor.Scripted, its display name, its briefing notes).
//
// It owns the scenario format (Scenario, ParseScenario, LoadScenario,
// DemoScenario, EchoScenario) and the Transport that plays it
// (New, with WithScenario, WithDelayScale and WithOutputCap).
//
// # Choosing a scenario
//
// A session plays, in order of preference: the scenario named by
// CODESESSION_SCRIPT in SessionSpec.Env (a JSON file, read against the
// session's Cwd when relative, or "builtin:demo" / "builtin:echo"); the
// transport's WithScenario; the built-in echo scenario, which answers every
// turn with "Scripted reply to turn N: <input>". A file that does not load
// or parse makes Open fail with a *messages.Error (code invalid, Field
// "env.CODESESSION_SCRIPT") that names the file and the problem.
//
// # The scenario format
//
//	{"turns": [{"match": "test", "costUsd": 0.01, "steps": [
//	    {"thinking": "..."},
//	    {"text": "I'll add a test."},
//	    {"tool": {"name": "Bash", "input": {"command": "go vet ./..."}, "output": "", "isError": false, "ask": true}},
//	    {"write": {"path": "a/b.go", "content": "package a\n"}},
//	    {"edit": {"path": "a/b.go", "old": "package a", "new": "package b"}},
//	    {"delete": {"path": "old.txt"}},
//	    {"delay": "50ms"},
//	    {"fail": "message"} | {"crash": "message"} | {"end": "text"}
//	 ]}],
//	 "fallback": {"steps": [{"text": "nothing scripted for {{input}}"}]}}
//
// Decoding is strict (unknown, duplicate or wrongly cased keys, wrong
// types, nulls and trailing data are errors), and every step holds exactly
// one action; a fail, crash or end step must be its turn's last. Errors are
// *messages.Error with code invalid whose Field is the JSON path of the
// problem, e.g. "turns[1].steps[2].delay".
//
// Each StartTurn takes the first unused turn whose non-empty match is a
// substring of the input, else the next unused turn without a match, else
// the fallback turn, else a turn answering ReplyExhausted.
//
// What the steps emit, all with the StartTurn's turn number:
//   - text: up to three incremental EvText{Delta: true} chunks, then one
//     complete EvText (Delta false) holding the whole text, so a consumer may
//     ignore the deltas. thinking: one EvThinking. Both expand the
//     placeholders {{input}}, {{turn}}, {{model}}, {{effort}} and {{posture}}.
//   - tool: EvToolUse, then EvToolResult with the scripted output, capped by
//     transports.CapOutput (Truncated and OriginalBytes set when it fires).
//   - write, edit, delete: EvToolUse ("Write" {file_path, content}, "Edit"
//     {file_path, old_string, new_string}, "Bash" {command: "rm -v -- ..."}),
//     the real change in the working directory, then EvToolResult. A path
//     that leaves the workspace (through "..", an absolute path outside it, a
//     symlink or a dangling symlink) gets an isError result
//     "refused: path escapes the workspace" and nothing is touched; an edit
//     whose old text does not occur exactly once is an isError result.
//   - "ask": true on tool, write, edit or delete raises EvClarification
//     (after the EvToolUse) and blocks the turn until Answer: allow_once runs
//     the call, allow_session also stops asking for that tool name for the
//     rest of the session, deny gives an isError "denied: <reason>" result and
//     the turn goes on, cancel gives an isError result and ends the turn
//     interrupted. Posture decides first: full never asks, acceptEdits does not
//     ask for write, edit or delete, plan refuses every tool, write, edit and
//     delete with an isError "refused in plan posture" result. A tool outside
//     SessionSpec.AllowedTools is refused likewise. Answer with an id that was
//     never raised is not_found; with one that is no longer waiting (answered,
//     or its turn interrupted) it is a conflict.
//   - delay: waits (scaled by WithDelayScale), cut short by Interrupt or Close.
//   - fail: EvError, then EvTurnEnd{State: error, Text: message}.
//   - crash: EvError{Fatal: true}; the session is dead, StartTurn returns
//     code internal "backend exited", and no EvTurnEnd follows.
//   - end: EvEnded; StartTurn then returns code not_live.
//
// A turn that runs out of steps ends with EvTurnEnd{State: completed, Text:
// the last text step's text, NumTurns, CostUSD (the turn's costUsd, charged
// however the turn ends with an EvTurnEnd), TotalCostUSD, Usage (input and output bytes / 4,
// rounded up)}. Steering arrives as EvText "[steer] <text>" at the next step
// boundary; steering the turn closed before delivering is reported as an
// EvWarning.
//
// # Lifecycle and concurrency
//
//	live --crash--> dead ---\
//	live --end----> ended ---+--Close--> closed
//	live ---------------Close/
//
// Each session runs its turns on one goroutine, which is the only caller of
// the Sink. EvStarted (turn 0) is that goroutine's first event: it may
// arrive just after Open returns and always precedes every turn event. The
// methods (StartTurn, Answer, Interrupt, Steer, SetModel, SetPosture) only
// change state under a mutex and never block, so they may be called from
// the Sink itself (the tests answer clarifications and start turns from
// it); Close may not be, since it waits for the goroutine that is calling
// the Sink. StartTurn while a turn runs is a conflict; Interrupt with no
// turn running does nothing. From the moment Close is called no new Sink
// call starts; Close waits for the goroutine, and once it returns nil no
// Sink call is running either. If its ctx ends first (a Sink call is
// stuck) it returns a timeout error and a later Close waits again. A
// Scenario is read-only once in use and may serve many sessions.
//
// # Testing
//
// The tests run sessions inside testing/synctest bubbles, so scripted
// delays take no real time and synctest.Wait marks "the session is
// blocked again"; TestMain fails the package if a session goroutine is
// left over. testdata/demo.json is the demo scenario (embedded, see
// DemoScenario); its transcript is golden in testdata/demo.transcript,
// regenerated with go test -run TestDemoTranscript -rewrite.
// FuzzParseScenario checks that any input parses to a valid scenario that
// survives a JSON round trip, or fails with a typed error.
package script
