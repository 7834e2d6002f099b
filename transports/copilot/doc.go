// Package copilot is the GitHub Copilot CLI backend: `copilot --acp`
// driven by the ACP client of transports/acp, one persistent process per
// session.
//
// It owns copilot's descriptor (seed 003's row, as ACP changes it:
// clarifications over session/request_permission, interrupt, live
// posture), its posture map (plan selects Copilot's plan mode, the rest its
// agent mode; allow-all stays off, so every gated call reaches the client's
// gate and posture) and its launch: --acp, the model as --model, the
// effort as --reasoning-effort (low/medium/high/max, 1:1), allowedTools as
// --available-tools (AvailableTools maps Claude Code's and the native
// backend's names to copilot's and refuses, unsupported, a name with no
// equivalent), and COPILOT_AUTO_UPDATE=false. Offline use against a model server of one's
// own is Copilot's BYOK mode, set in the session's Env
// (COPILOT_OFFLINE=true, COPILOT_PROVIDER_BASE_URL, COPILOT_PROVIDER_API_KEY,
// COPILOT_MODEL).
//
// Concurrency and testing are transports/acp's; this package's tests run
// the conformance suite and the posture, effort and allowed-tools checks against the real
// CLI (CODESESSION_COPILOT_BIN, pinned PinnedVersion) and modelmock.
package copilot
