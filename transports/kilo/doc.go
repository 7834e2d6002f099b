// Package kilo is the Kilo Code CLI backend: `kilo acp` driven by the ACP
// client of transports/acp, one persistent process per session.
//
// Kilo's CLI is a fork of opencode, so its per-session configuration is
// opencode's (opencode.Config: every gated tool set to ask, no autoupdate,
// no sharing, the model as provider/model), handed over in
// KILO_CONFIG_CONTENT; its posture map is opencode's agents as the "mode"
// config option (plan for plan, code for the rest).
//
// This package's tests run the conformance suite and the confinement
// check against the real CLI (CODESESSION_KILO_BIN, pinned PinnedVersion)
// and modelmock's Chat Completions wire.
package kilo
