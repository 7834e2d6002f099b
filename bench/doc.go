// Package bench is the concurrent-session harness and the benchmark suites
// (`codesession bench`): it drives many sessions at once, measures them next
// to baselines taken in the same run, reports ratios, and fails only on a
// correctness check (a lost or duplicated event, a session not released),
// never because the machine was slow. The suites arrive with the benchmark
// issue; this package holds the place in the fixed layout.
package bench
