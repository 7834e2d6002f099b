// Package droid is the "droid" backend: it drives Factory Droid through
// its real CLI, one persistent process per session speaking stream-jsonrpc:
//
//	droid exec --input-format stream-jsonrpc --output-format stream-jsonrpc
//
// It is built on the CLI kit (transports/cli), which runs the process,
// waits for the replies to its requests, calls the Sink from one emitter,
// escalates an interrupt, stops the process on Close and glues the warm
// pool. This package owns what is droid's: the wire (Decode over
// ParseLine, and the encoders, pure), the session core (core.go: decoded
// lines and ops in, events and stdin writes out, no I/O), its ops
// (session.go: the handshake, settings, turns, restarts), the capability
// descriptor (seed 003, moved to stream-jsonrpc) and the Transport with
// its Probe (`droid --version`, which needs no login).
//
// # Process and environment
//
// The process runs in its own process group under proc's watchdog
// (SessionSpec.Procs: the session's cgroup and a boot-sweep record, so no
// droid outlives the runtime) in SessionSpec.Cwd with the caller's
// environment less other vendors' credentials, HOME=SessionSpec.Home
// when set, then WithEnv and SessionSpec.Env. The model is droid's: a
// bring-your-own-key model (customModels in $HOME/.factory/settings.json,
// selected as custom:<Display-Name>-<n>) needs no Factory login. The binary
// is WithBinary, else $CODESESSION_DROID_BIN, else droid on PATH.
//
// # Mapping
//
//   - Open sends droid.initialize_session with a fresh UUID (the external
//     session id, in EvStarted), or droid.load_session with
//     SessionSpec.ResumeExternalID (`droid exec -s <id>` fails offline,
//     the JSON-RPC load does not), then droid.update_session_settings with
//     the posture's autonomy level and the effort (low/medium/high/max,
//     1:1). When droid reports other settings than asked (a model without
//     reasoning efforts reports "none") a warning says so.
//   - StartTurn sends droid.add_user_message. Notifications become events:
//     create_message (assistant text) EvText, tool_call EvToolUse (once,
//     with the complete input), tool_result EvToolResult (capped by
//     WithOutputCap, once per call), agent_turn_completed EvTurnEnd
//     (completed; interrupted for reason "cancelled"; errored otherwise)
//     with Usage and NumTurns (model messages in the turn).
//   - droid.request_permission becomes EvClarification (its request id,
//     the tool's name and input) after every file path it names has passed
//     the workspace gate (transports/gate); a refused path, and any
//     question in plan posture, is answered cancel without asking.
//     Answer: allow_once is proceed_once, allow_session proceed_always,
//     deny and cancel are cancel with the reason as droid's comment.
//     Droid ends its turn on a cancel without telling the model why, so
//     after a deny or a refusal the reason follows as a user message in
//     the same codesession turn, which closes when droid ends that one.
//   - Interrupt is droid.interrupt_session, escalated to SIGINT, SIGTERM
//     and SIGKILL of the process group after InterruptDeadlines; a killed
//     process is started again (load_session) with the next turn.
//   - Postures: below full droid runs at autonomy "off" and asks about
//     every change; codesession answers by posture (plan refuses all,
//     default asks the human, acceptEdits approves file edits that passed
//     the gate and asks about commands). full is autonomy "high". Droid's
//     own "low" is not used: it writes files outside the workspace without
//     asking, where the gate never sees them. SetPosture is
//     droid.update_session_settings{autonomyLevel} plus the core's posture.
//   - Droid's Execute tool decides by the risk level the model declares
//     for each command (riskLevel): the autonomy level is only as strict as
//     the model is honest. The descriptor says so.
//   - A stdout line over WithLineCap, or one that does not parse, is an
//     EvError; the stream goes on. The process exiting mid-turn is a fatal
//     EvError and the session refuses further turns.
//
// # Warm pool
//
// With WithWarmPool(n) (the runtime sets it from its config, warmPool) the
// transport keeps n droid processes per key booted and initialized ahead
// of need: droid takes seconds to answer its first request after a spawn,
// and that is most of a cold start. A start adopts one: autonomy, effort
// and, when it differs, the model go in the one
// droid.update_session_settings a cold start sends anyway; nothing is
// restarted. The key is what initialize fixes for good (binary, cwd,
// environment with HOME, a model named or not, the runtime's kit). The
// pool refills after the adopting session's first turn; a pooled process
// that died while idle is never adopted; DrainWarm kills what a runtime's
// kit pooled. pool.go says why each piece is there.
//
// # Concurrency
//
// A session's state is one core under one mutex. Per process a stdout
// reader, a stderr reader, a stdin writer and a waiter run; one emitter
// per session is the only caller of the Sink. Requests of the host
// (handshake, settings, interrupt) wait for droid's response outside the
// mutex. Close closes stdin, then signals the group, and waits for every
// goroutine.
//
// # Testing
//
// The wire is tested on the reference capture (testdata/droid), Decode
// against golden files (testdata/decode/*.jsonl -> *.golden, -update
// rewrites them) and fuzzed (FuzzParseLine, FuzzDecode); the core with table tests; the shell live against the
// real CLI and modelmock (Chat Completions): text, permission allowed and
// denied, the gate, posture and effort as droid reported them, interrupt,
// resume, the warm pool (adoption proved by the pooled pid, its model and
// autonomy in effect, a dead pooled process skipped, the drain by pid, size
// 0), and the transporttest conformance suite. BenchmarkFirstTurn times a
// start's first turn with and without the pool. Live tests find the CLI
// through $CODESESSION_DROID_BIN or PATH and skip without it, except under
// CI=true, where they fail.
package droid
