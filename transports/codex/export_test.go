package codex

// CodexBinaryForTest finds the real CLI for the external tests (skipping,
// or failing under CI=true, without it).
var CodexBinaryForTest = codexBinary
