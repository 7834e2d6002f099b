package codex

// CodexBinaryForTest finds the real CLI for the external tests (skipping,
// or failing under CI=true, without it).
var CodexBinaryForTest = codexBinary

// WarmRecordsForTest reads a kit's records of warm-pool process groups.
var WarmRecordsForTest = warmRecords

// GroupAliveForTest says whether a process group still runs.
var GroupAliveForTest = groupAlive
