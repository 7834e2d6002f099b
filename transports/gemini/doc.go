// Package gemini is the Gemini CLI backend: `gemini --acp` driven by the
// ACP client of transports/acp, one persistent process per session.
//
// It owns gemini's descriptor, its posture map (gemini's own session modes:
// plan for plan, default for the rest, so every gated call asks and passes
// the client's gate and posture; autoEdit and yolo would run calls without
// asking) and its launch: --acp, the model as -m, the workspace trusted
// (GEMINI_CLI_TRUST_WORKSPACE=true; without it gemini exits 55), and, when
// the session uses an API key (GEMINI_API_KEY in its Env), a system
// settings file pinning the auth type to gemini-api-key, without which a
// GOOGLE_GEMINI_BASE_URL selects the "gateway" auth and gemini exits 41.
// The client advertises no file system: gemini
// then reads and writes the workspace itself (with a client file system, a
// missing file broke its write_file).
//
// Gemini has no effort setting: an effort at start is rejected with
// unsupported.
//
// Concurrency and testing are transports/acp's; this package's tests run
// the conformance suite and the posture checks against the real CLI
// (CODESESSION_GEMINI_BIN, pinned PinnedVersion) and modelmock's Gemini
// wire.
package gemini
