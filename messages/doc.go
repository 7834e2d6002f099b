// Package messages is codesession's vocabulary: the op contract (Start,
// ReadTurn, Answer, Guide, SetPosture, Interrupt, Stop, ListBackends) and
// their results, the closed read-turn union, the normalized agent events and
// registry annotations that are persisted per session, the session record
// (meta.json), postures, effort levels, capability descriptors and the typed
// error scheme.
//
// It is the root of the dependency graph: it imports nothing of ours, so every
// other package (transports, actors, the control plane, the CLI) can share it.
// Every op has Validate; every enum has an invalid zero value and a String.
// Values are plain data, safe to copy and to send between goroutines once
// built; nothing here holds a lock.
//
// Testing: codec_test.go round-trips every type through JSON and msgpack.
package messages
