// Package gate is the workspace gate of seed 002 ("The gate"), shared by
// every backend: a path a tool names must resolve inside the session's
// workspace after symlinks, read both from the workspace as given and from
// its real path; a path through a dangling symlink is refused even when the
// link points inside; glob patterns are checked the same way and every match
// again. Resolve hands back the one real path that was checked, so what was
// checked is what is opened.
//
// Native's file tools call it directly; backends whose CLI asks permission
// for a file tool run the question's paths through it before a human or a
// policy sees the question. A Workspace is immutable and safe for concurrent
// use. gatetest builds the symlink tree the gate table runs in, for any
// backend's tests; FuzzGate holds the one promise under the fuzzer.
package gate
