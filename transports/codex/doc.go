// Package codex is the "codex" backend: it drives OpenAI Codex through its
// richest surface, the JSON-RPC `codex app-server`,
// one persistent process per session:
//
//	codex app-server          (CODEX_HOME=<the session's>, cwd = SessionSpec.Cwd)
//	>> initialize, initialized
//	>> thread/start {cwd, model, approvalPolicy, sandbox}   or thread/resume {threadId}
//	>> turn/start {threadId, input, [model, effort, approvalPolicy, sandboxPolicy]}
//	>> turn/steer, turn/interrupt
//	<< notifications, and approval requests answered with {decision}
//
// It is built on the CLI kit (transports/cli), which owns the process,
// its restarts, the host's requests waiting for their replies (JSON-RPC
// responses, correlated by id), the one emitter, Answer, the interrupt's
// escalation, Close and the warm-pool glue. Codex supplies what is its
// own: the wire (rpc.go: parseMessage, the pure decoder decodeWire and the
// encoders), the session core (core.go: server messages and answers in,
// events, stdin writes and follow-up requests out, no I/O; its interrupt
// request names the thread and the turn), the handshake, thread and
// per-turn settings (session.go), the capability descriptor with the
// posture map (descriptor.go), the Transport with its CODEX_HOME
// (transport.go) and the warm pool's homes and adoption (pool.go).
//
// # CODEX_HOME and credentials
//
// Each session gets its own CODEX_HOME, written by the transport before
// the process starts: <SessionSpec.Home>/.codex, else a folder per session
// id under WithHomeRoot (default: the user cache folder's
// codesession/codex-homes), never the user's repository; it outlives the
// session (resume and `codex resume` read the thread from it), except
// that one made for a session that never got a thread is removed at
// Close. Its config.toml sets the model, effort and sandbox, trusts the
// working directory, and, when the session's environment has
// OPENAI_BASE_URL, a Responses model
// provider at that URL whose key is OPENAI_API_KEY (retries off for a
// loopback server such as modelmock). A CODEX_HOME in SessionSpec.Env (or
// WithEnv) is the user's own: it is used as is and nothing is written
// there. The environment is the caller's less other vendors' credentials,
// then HOME=SessionSpec.Home when set, CODEX_HOME, WithEnv and
// SessionSpec.Env, which win. The binary is WithBinary, else
// $CODESESSION_CODEX_BIN, else codex on PATH.
//
// # Mapping
//
//   - Open emits EvStarted (turn 0) with the thread id as the external
//     session id; events Codex sends before that (config warnings) follow
//     it. ResumeExternalID resumes that thread (thread/resume).
//   - Deltas of agent messages and reasoning summaries are EvText and
//     EvThinking; commandExecution items are EvToolUse "exec_command" and
//     EvToolResult (output capped by WithOutputCap); fileChange items are
//     "apply_patch" with the changed paths (file_path is the first, for the
//     runtime's tool-event diff); MCP, web search and dynamic tool items are
//     tool uses under their own names. turn/completed closes the turn with
//     EvTurnEnd (completed, interrupted, or error for a failed turn), the
//     turn's token usage (the thread total now less the total when it
//     began; no USD: Codex reports none) and, as Diff with Source
//     "backend", the last turn/diff/updated: Codex's own diff, kept beside
//     the runtime's git diff.
//   - Approval requests become EvClarification (ids "codex-N"): commands
//     as "exec_command" {command, cwd, reason}, file changes as
//     "apply_patch" {changes, file_path}. Every path of a file change passes
//     the workspace gate (transports/gate) first; one that escapes is
//     declined with a warning and nobody is asked. Answer maps allow_once to
//     accept, allow_session to acceptForSession, deny to decline and cancel
//     to cancel; a deny's reason is sent by turn/steer before the decline,
//     since Codex's decline carries no message. Other server requests are
//     refused with a JSON-RPC error and a warning.
//   - Postures (PostureOf, in the descriptor): plan = read-only sandbox,
//     approvals on-request; default = workspace-write, approval untrusted
//     (Codex asks about every patch and every command it does not know to be
//     safe; under on-request it never asks about a patch inside the
//     workspace, verified live); acceptEdits = the same, with file changes
//     accepted by the transport after the gate; full = danger-full-access,
//     approvals never. SetPosture applies to the next turn/start
//     (approvalPolicy, sandboxPolicy); auto-acceptance changes at once.
//   - SetModel sets model and effort of the next turn/start (max = xhigh).
//     Steer is turn/steer. Interrupt is turn/interrupt (before Codex named
//     the turn there is nothing to ask, and the signals start at once); a
//     turn still open after WithInterruptDeadlines' grace has its process
//     group signalled (SIGINT, SIGTERM, SIGKILL) and ends interrupted, and
//     the next turn starts a new app-server on the thread.
//   - A notification the core does not know is an EvWarning carrying its
//     params (Input), never dropped; a line that does not parse, or one over
//     WithLineCap, is an EvError; neither stops the stream.
//   - The process exiting mid-turn is EvError{Fatal: true} with its stderr,
//     and the session refuses further turns (the runtime resumes it);
//     exiting between turns is a warning, and the next turn starts it again
//     with thread/resume.
//
// # Processes and the warm pool
//
// Every app-server starts through the process kit (transports/proc) in
// SessionSpec.Procs: its own process group under the watchdog, the
// session's cgroup and a boot-sweep record, released when it exits.
//
// WithWarmPool(n) (the runtime's warmPool) keeps n app-servers per key
// that have finished initialize, the ~2 s of a start (node launcher,
// native boot, handshake) that the first turn otherwise waits for. The
// key is what a process cannot change after boot: binary, cwd, the
// process environment (hashed, a user's CODEX_HOME included), the folder
// of the session's CODEX_HOME and the runtime's process kit. Each pooled
// process has a CODEX_HOME of its own (".warm-<hex>" beside the session
// homes). A start that fits adopts one: the home is renamed to the
// session's CODEX_HOME (the old path stays a link for the running process
// until the session closes), config.toml is rewritten for the session's
// model, effort and posture, and thread/start carries cwd, model, sandbox,
// approval policy and developer instructions (Codex reads config.toml
// again for a new thread); nothing is restarted. A start whose CODEX_HOME
// exists already, or that resumes a thread, boots its own. Pooled
// processes boot under a group of their own in the runtime's kit; one
// that died while idle is discarded, never adopted; the pool refills a
// key in the background after the adopting (or cold) session's first turn
// has ended; DrainWarm (Runtime.Close) kills what is pooled and removes
// its CODEX_HOMEs. After a daemon is killed, proc's boot sweep kills its
// pooled processes, and the next pool's first boot in that folder removes
// the CODEX_HOMEs they left (sweepWarmHomes: by the process group each
// home records).
//
// # Lifecycle
//
//	Open --initialize, thread/start|resume--> idle <--turn/start / turn/completed--> running
//	                     |  \--exit--> stopped --StartTurn (thread/resume)--> running
//	                     |  running --exit--> dead (fatal; turns refused)
//	     any --Close--> closed
//
// # Concurrency
//
// A session's state is one core under the kit shell's mutex. Per process
// a stdout reader, a stderr reader, a stdin writer and a waiter run; per
// session one emitter is the only caller of the Sink, in the order the
// core produced the events. The methods never wait on the Sink; requests
// (turn/start, turn/steer, turn/interrupt) wait for their response,
// bounded by WithControlTimeout and the caller's context, and the steer
// that carries a deny's reason runs on a goroutine of its own before the
// decline is written. From the moment Close is called no sink call
// starts; Close closes stdin, signals the group (SIGTERM, then SIGKILL)
// when the process lingers, and returns once every goroutine is done. A
// pooled process is a session without a sink until a start adopts it (its
// events wait, as a cold start's do until EvStarted); boots and refills
// run on the warm pool's goroutines (transports/warmpool), one goroutine
// per session waits for its first turn's end to refill, and the Transport
// stays safe for concurrent use once SetWarmPool has been called.
//
// # Testing
//
// The pure parts are tested on the reference capture (testdata/codex:
// every line parses; the replay through the core matches its golden
// .events transcript, regenerated with -rewrite; FuzzReadLine, seeded from
// the capture, runs parser and core on any line). The gate, acceptEdits
// and answer errors have table tests; so have the kit's side of codex: the
// wire decoder (replies by id, refusals), the interrupt request the core
// builds, and a deny's reason steered before the decline. Live tests run the real CLI against
// modelmock: text with a reasoning summary and usage, a command allowed and
// denied (the reason reaching the model), cancel, each posture row against
// what the app-server reports and the sandbox the model request names,
// per-turn model, effort and posture, restart on the same thread after a
// kill between turns, death mid-turn, the warm pool (adoption with the
// asked model, effort and posture, a dead pooled process skipped, drain,
// size 0, and through actors.Runtime: Runtime.Close leaves no process,
// record or pooled CODEX_HOME), the transporttest conformance suite,
// and a whole session through actors.Runtime (an apply_patch asked and
// allowed, in the runtime's diff and Codex's own beside it; steer,
// interrupt, stop and resume of the record on the same thread). They find
// the CLI through $CODESESSION_CODEX_BIN or PATH and skip without it,
// except under CI=true, where they fail. BenchmarkLineOverhead measures the
// cost per app-server line against a generic JSON decode;
// BenchmarkFirstTurn a start to its first turn's end with and without the
// warm pool.
package codex
