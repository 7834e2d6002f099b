// Package qwen is the Qwen Code backend: `qwen --acp` driven by the ACP
// client of transports/acp, one persistent process per session.
//
// ACP rather than qwen's stream-json mode: over ACP qwen asks before
// edits and shell commands mid-turn (session/request_permission), offers
// its session modes and session/load, which stream-json cannot.
//
// It owns qwen's descriptor, its posture map (qwen's session modes: plan
// for plan, default for the rest, so every gated call asks and passes the
// client's gate and posture; qwen starts a session in "auto", where an LLM
// classifier approves calls, and auto-edit and yolo run calls unasked) and
// its launch: --acp, the OpenAI-compatible auth (--auth-type openai; the
// key and base URL come from the session's OPENAI_API_KEY and
// OPENAI_BASE_URL) and the model as -m.
//
// Qwen has no effort setting: an effort at start is rejected with
// unsupported.
//
// This package's tests run the conformance suite, the posture checks and
// the confinement check against the real CLI (CODESESSION_QWEN_BIN,
// pinned PinnedVersion) and modelmock's Chat Completions wire.
package qwen
