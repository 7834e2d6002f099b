// Package acp is the one Agent Client Protocol client behind every ACP
// backend (opencode, copilot, gemini): github.com/coder/acp-go-sdk over the
// agent's stdio, one persistent process and one ACP session per
// codesession session. A backend package is thin: an Agent (descriptor,
// how to find and launch the CLI, which session mode stands for a
// posture) handed to New.
//
// # Lifecycle
//
//	Open: spawn (proc kit: own process group, watchdog, cgroup, record)
//	      -> initialize (no fs, no terminal)
//	      -> session/new | session/load (resume, where loadSession is offered)
//	      -> mode for the posture (session/set_mode or the "mode" config option)
//	      -> EvStarted{ExternalSessionID: the ACP session id}
//	StartTurn: session/prompt; session/update -> EvText, EvThinking,
//	      EvToolUse, EvToolResult; the prompt's stopReason -> EvTurnEnd
//	      (end_turn completed, cancelled interrupted)
//	Interrupt: session/cancel (a pending question answered cancelled);
//	      after the grace the process is killed and the turn closed interrupted
//	Close: stdin closed, SIGTERM, SIGKILL to the group; every goroutine waited
//
// # The warm pool
//
// With WithWarmPool (the runtime sets it from its config, warmPool) a
// transport keeps booted sessions ready: spawned, initialized, session/new
// done and the posture's mode selected, per key (kit, binary, cwd, HOME,
// model, effort, allowed tools, and the environment's hash: everything that makes two
// processes not interchangeable). Open adopts one when it can (not for a
// resume): the mode of the start's posture is selected through the
// protocol where it differs, then EvStarted. When no process of the
// start's key is idle, one of a key that differs only in the model is
// adopted instead if the agent offers the start's model over ACP (a
// select config option of category "model", as opencode's, else
// session/set_model, as gemini's): the model is switched before the mode,
// and the pool still refills the start's own key. The key is learnt from use,
// so the first start of a key boots its own; the pool refills once the
// adopting (or booting) session's first turn has ended. A pooled process
// has its own group in the runtime's kit and its own scratch directory;
// one that died idle is discarded, never adopted; DrainWarm kills what is
// pooled (the runtime calls it when it closes). See pool.go.
//
//	boot (pool) -> idle -> adopted by Open -> a session like any other
//	                    \-> died idle / drained / evicted -> killed, discarded
//
// A tool is named in events by its ACP kind (edit, execute, read, ...),
// the one name the agents share; EditToolNames lists the kinds that change
// files. Its Input is {"title", "paths", "rawInput"}.
//
// # Permissions
//
// Every session/request_permission passes the workspace gate
// (transports/gate) first: a path that resolves outside the workspace is
// rejected before anyone sees the question. Then the posture decides:
// reads run; plan rejects the rest; acceptEdits allows edits; full allows
// everything; otherwise the question becomes an EvClarification, and the
// answer picks the agent's option by its kind (allow_once, allow_always,
// reject_once), since option ids differ per agent. ACP carries no reason
// with a rejection, so a deny's reason (and a refusal's) reaches the agent
// at the head of the next prompt. Agents are configured to ask (opencode's
// per-session config says "ask"; gemini and copilot ask by default), so the
// client's policy is the posture in every mode.
//
// # The reader
//
// The agent's stdout passes the ACP reader before the SDK: a line that is
// not a JSON-RPC 2.0 object, or is over the line cap, is dropped and
// reported as a non-fatal EvError; the stream goes on (FuzzFilterLines).
// A process that dies is one fatal EvError with the end of its stderr,
// closing the running turn; the session then refuses turns.
//
// # Concurrency
//
// A session's methods are called one at a time; events come from the
// SDK's notification goroutine, its per-request goroutines and the turn's
// goroutine, serialized by the session's mutex (the sink is called under
// it and must not block for long). Close waits for all of them.
//
// # Testing
//
// The policy, the reader, the option choice and the event normalization
// have unit tests on captures (testdata/*.jsonl, recorded from the real CLIs);
// FuzzFilterLines fuzzes the reader. The backends run the transporttest
// conformance suite and their own live tests against the real CLIs and
// transports/modelmock; WithWireTap shows what a CLI actually received.
// acptest.WarmPoolRun, ModelSwitchRun, NoPoolRun and BenchFirstTurn are
// the warm pool's live checks and benchmark, run by each backend
// (ModelSwitchRun by those that offer a model switch).
package acp
