// Package claudecode is the "claude-code" backend: it drives Claude Code
// through its real CLI the way the Claude Agent SDK does, one persistent
// process per session speaking stream-json with the control protocol:
//
//	claude -p --input-format stream-json --output-format stream-json --verbose
//	       --permission-prompt-tool stdio --permission-mode M
//	       --allow-dangerously-skip-permissions [--model X] [--effort E]
//	       [--allowedTools a,b --tools a,b] [--append-system-prompt S]
//	       (--session-id ID | --resume ID)
//
// It is built on the CLI kit (transports/cli), which runs the process
// (spawn, pipes, capped lines, stderr tail), waits for the replies to
// control requests, calls the Sink from one emitter, escalates an
// interrupt, stops the process on Close and glues the warm pool. This
// package owns what is claude-code's: the protocol (Decode over ParseLine,
// and the stdin encoders, pure), the session core (core.go: decoded lines
// and ops in, events and stdin writes out, no I/O), its ops (session.go:
// the handshake, turns, steering, set_model, set_permission_mode), the
// capability descriptor (seed 003) and the Transport with its Probe
// (`claude --version`).
//
// # Process and environment
//
// The process runs in its own process group in SessionSpec.Cwd, with the
// caller's environment less other vendors' credentials and NODE_OPTIONS,
// plus DISABLE_AUTOUPDATER=1, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1,
// CLAUDE_CODE_SDK_READS_SESSION_STATE=1, IS_SANDBOX=1 when running as root
// (bypassPermissions refuses root without it), HOME=SessionSpec.Home when
// set, then WithEnv and SessionSpec.Env, which win. The binary is
// WithBinary, else $CODESESSION_CLAUDE_BIN, else claude on PATH.
//
// A new session gets a fresh UUID as --session-id, so EvStarted (turn 0,
// after the initialize handshake) carries the external session id at once;
// SessionSpec.ResumeExternalID resumes with --resume (when Claude Code
// keeps no transcript of it under that HOME, the same id starts afresh and
// a warning says so).
//
// # Warm pool
//
// With WithWarmPool(n) (the runtime sets it from config warmPool, default
// 1) the transport keeps n processes per key that have finished their
// initialize handshake; a start with that key adopts one instead of
// booting (pool.go, on transports/warmpool). The key is what cannot change
// after boot: binary, cwd, the hashed environment (HOME included),
// effort, allowedTools, the appended system prompt (a second initialize
// with appendSystemPrompt is acknowledged and ignored: verified), whether
// a model is named, and the runtime's process kit. At adoption the model
// (set_model) and the permission mode (set_permission_mode) are set by
// control request where they differ from the boot's; the session id is
// the UUID the pooled process was started with. A resume never uses the
// pool. The pool refills a key after the first turn of the session that
// used it (a boot beside that turn slowed it on two cores). Pooled
// processes start under a proc group of their own in the runtime's kit
// (watchdog, cgroup, boot-sweep record), are killed when discarded or
// drained (DrainWarm, at runtime close), and an adopted one's group is
// closed with its session.
//
// # Mapping
//
//   - StartTurn writes a user message. system/init, assistant (text,
//     thinking, tool_use) and user (tool_result, capped by WithOutputCap
//     with Truncated and OriginalBytes) lines become EvText, EvThinking,
//     EvToolUse and EvToolResult; the result line closes the turn with
//     EvTurnEnd (completed, error for an error result, interrupted after an
//     interrupt or cancel), NumTurns, Usage, TotalCostUSD (cumulative) and
//     CostUSD (the turn's share of it).
//   - Steer writes a user message while the turn runs. The CLI folds it in
//     at the next tool boundary, or runs it right after the turn's answer
//     with a result of its own; so once steering was sent, the turn closes
//     on system/session_state_changed{idle} (or after a settle delay
//     without one), with the results' turns and costs added up.
//   - can_use_tool becomes EvClarification (ClarificationID = the CLI's
//     request_id, ToolName, Input). Answer sends allow{updatedInput} or
//     deny{message}; cancel is deny with interrupt; allow_session adds the
//     CLI's addRules suggestions as session rules (never the workspace's
//     settings files), or, when it offers none, is remembered here and
//     answers the same tool and input pattern (a command's first word, a
//     path's directory, else the exact input) by itself. A tool outside
//     SessionSpec.AllowedTools is denied without asking. Other requests of
//     the CLI (hooks, MCP, elicitation) are refused with an error response.
//   - Interrupt sends the interrupt control request (cancel_queued) and
//     escalates when the turn does not end: SIGINT, SIGTERM, SIGKILL to the
//     process group after InterruptDeadlines; the turn ends interrupted
//     either way, and a killed process is started again with the next turn.
//   - SetPosture is set_permission_mode (plan, default, acceptEdits,
//     bypassPermissions); SetModel is set_model (effort is fixed at start:
//     a different one is unsupported). Each control request is bounded by
//     WithControlTimeout and the caller's context; an error response is a
//     *messages.Error (invalid, unsupported, not_found or internal).
//   - A stdout line over WithLineCap is dropped and reported as an EvError;
//     a line that does not parse is an EvError; neither stops the stream.
//   - The process exiting mid-turn is EvError{Fatal: true} with the exit
//     status and the end of stderr, and the session refuses further turns
//     (the runtime reopens it with --resume). Exiting between turns is a
//     warning, and the next turn starts it again.
//
// # Lifecycle
//
//	Open --handshake--> idle <--StartTurn / result--> running
//	                     |  \--exit--> stopped --StartTurn (respawn)--> running
//	                     |  running --exit--> dead (fatal; turns refused)
//	     any --Close--> closed
//
// # Concurrency
//
// A session's state is one core under one mutex. Per process a stdout
// reader, a stderr reader, a stdin writer and a waiter run; per session
// one emitter is the only caller of the Sink, in the order the core
// produced the events; an interrupt runs an escalator. The methods never
// wait on the Sink, so they may be called from it; control requests
// (SetPosture, SetModel, Interrupt's acknowledgement) wait for the CLI's
// response. From the moment Close is called no Sink call starts; Close
// closes stdin, then signals the group (SIGTERM, SIGKILL), and waits for
// every goroutine, or kills the group when its context ends.
//
// # Testing
//
// Decode is golden-tested (testdata/decode/*.jsonl, captured stdout and
// edge cases, against *.golden; -update rewrites them) and fuzzed
// (FuzzDecode, seeded from the same lines). The pure parts are tested on
// the reference captures (testdata/claude:
// every line parses; each host-driven capture replayed through the core
// matches its golden .events transcript, regenerated with -rewrite;
// FuzzReadLine, seeded from the captures; FuzzParseLineHead holds the fast
// read of a line's type, taken from the prefix the CLI writes, to the full
// decode of the head). The shell is tested against the
// test binary acting as a fake claude (escalation, control timeouts and
// errors), and live against the real CLI and modelmock: text, Write allowed,
// Bash denied, interrupt, set_permission_mode, the plan-mode classifier,
// steering, allow_session, resume, a process killed mid-turn, and the
// transporttest conformance suite. The live tests find the CLI through
// $CODESESSION_CLAUDE_BIN or PATH and skip without it, except under CI=true,
// where they fail. BenchmarkLineOverhead measures the transport's cost per
// CLI line next to the CLI's own turn latency; BenchmarkParseLineHead the
// fast head against the full one.
package claudecode
