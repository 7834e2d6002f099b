// Package grok is the "grok" backend: xAI's Grok Build CLI run once per
// turn as seed 003 describes it,
//
//	grok -p <input> --output-format json --permission-mode M [-m X]
//	     [--reasoning-effort E] (-s <uuid> | --resume <uuid>)
//
// REPLAY-TESTED, NOT TESTED LIVE: the grok CLI ships only from x.ai's own
// installer, which the build machines cannot reach, so every test runs a
// fake grok (the test binary, fake_test.go) that replays exactly the shapes
// seed 003 documents for grok 0.2.93. The descriptor's display name and
// notes say so, and so does `codesession backends`.
//
// # Mapping
//
//   - Open pins the session to a fresh UUID (EvStarted carries it); turn 1
//     passes it with -s, every later turn (and a resumed session's first)
//     with --resume. No process runs between turns.
//   - A turn's stdout is one PRETTY-PRINTED object, so it is buffered
//     (lines over WithLineCap dropped with an EvError, the whole capped by
//     WithOutputCap) and parsed once after the process exits (ParseOutput,
//     fuzzed). The success object {"text","stopReason","sessionId",
//     "requestId","thought"} gives EvThinking, EvText and EvTurnEnd
//     completed; stopReason "Cancelled" adds a warning (headless grok
//     cancels calls that need approval); the error envelope
//     {"type":"error","message"} gives EvTurnEnd errored. Output before the
//     object is reported as an EvError and the object still read.
//   - A process that prints no object is an errored turn, or a fatal
//     EvError when grok never answered this session (a broken install);
//     the session then refuses turns.
//   - Postures are --permission-mode: plan, default, acceptEdits = auto
//     (grok's own acceptEdits cancels gated calls headless: the naming
//     trap), full = bypassPermissions. SetPosture applies to the next turn.
//     Effort is --reasoning-effort (1:1). --tools is never passed (it
//     crashes session creation in 0.2.93); an explicit AllowedTools is
//     rejected. grok -p never asks, so no clarification is ever raised.
//   - Interrupt sends SIGINT to the turn's process group, then SIGTERM
//     and SIGKILL after InterruptDeadlines; the turn ends interrupted.
//
// # Concurrency
//
// One turn runs at a time; its goroutine reads stdout, waits for the
// process and is the only caller of the Sink while it runs (Open calls it
// once, for EvStarted). Close kills a running turn's process group and
// waits for that goroutine, so no event arrives after Close returned.
//
// # Testing
//
// TestConformance runs transporttest against the fake; the package's
// tests check the argv the fake received (posture, effort, -s/--resume,
// no --tools), the acceptEdits trap, the error envelope and interrupt.
package grok
