// Package transports defines how codesession drives a backend: the narrow
// Transport and Session interfaces, the optional abilities a session may have
// (found by type assertion: Interrupter, Steerer, ModelSetter, PostureSetter),
// the capability descriptor (messages.Descriptor) and the backend Registry.
// One sub-package per backend implements them; transports/script is the
// deterministic scripted backend used by tests, the demo and the benchmarks.
//
// Concurrency: a Session's methods are called from one goroutine at a time
// (the transport host actor) and must not block for long; events flow back
// through the Sink from the backend's own goroutines, in order.
package transports
