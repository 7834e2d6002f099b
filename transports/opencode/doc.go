// Package opencode is the opencode backend: `opencode acp` driven by the
// ACP client of transports/acp, one persistent process per session.
//
// It owns opencode's descriptor (seed 003's row, as ACP changes it:
// clarifications, interrupt and live posture work over ACP where `opencode
// run` had none), its posture map and the per-session configuration: an
// OPENCODE_CONFIG_CONTENT that sets every edit, shell and fetch permission
// to "ask" (so each question reaches the client, its workspace gate and
// its posture), turns off autoupdate and sharing, and names the session's
// model. A caller adds its own configuration (a provider, such as a
// loopback model server) as a JSON object in CODESESSION_OPENCODE_CONFIG of
// the session's Env; the transport's keys win. The process gets --cwd and
// the working directory of the session: seed 003 found `opencode run`
// editing the parent checkout without --dir, and the live tests check that
// an ACP session edits its own cwd and nothing else.
//
// An effort at start goes into the same configuration as the
// reasoningEffort option of the build, plan, general and explore agents
// (WithEffort; opencode merges an agent's options into the model's provider
// options, so a Chat Completions request carries reasoning_effort): `opencode
// acp` has no --variant, and its ACP "effort" option picks from the model's
// variants, which a model opencode does not know to reason has none of.
// Model and effort are set at start only.
//
// Concurrency and testing are transports/acp's; this package's tests run
// the conformance suite and the posture, effort and cwd checks against the real
// CLI (CODESESSION_OPENCODE_BIN, pinned PinnedVersion) and modelmock.
package opencode
