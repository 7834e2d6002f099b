// Package controlplane is the daemon's HTTP control plane over an
// actors.Runtime: the routes of DESIGN "Control plane" (all in routes.go),
// the live SSE feed, bearer-token auth, and the daemon's lifecycle
// (Daemon: runtime + bridge + server, and its ordered Shutdown).
//
// # HTTP
//
// Handlers return errors; writeError is the one place a *messages.Error
// becomes a response: invalid 400, unauthorized 401, not_found 404,
// not_live / already_live / conflict 409, ceiling_exceeded / unsupported
// 422, internal 500 (503 when retryable: draining, not configured),
// timeout 503. Success is {ok:true,data}, failure {ok:false,error:{code,
// message,...}}. Request bodies are JSON (Content-Type application/json,
// at most Options.MaxBodyBytes, unknown fields and trailing data refused);
// session ids are checked with messages.ValidSessionID before they touch
// the store or the runtime. Every route but /healthz needs
// "Authorization: Bearer <token>", compared in constant time; the token
// lives in <home>/token (LoadOrCreateToken, mode 0600). The daemon drives
// every session under one owner scope (DefaultScope) and resumes with
// Takeover, so a record started elsewhere can be adopted. The browser
// console (package web, at "/") signs a browser in once with the token and
// then authenticates it by a session cookie, which the routes accept in
// place of the header (with a CSRF token on writes).
//
// # The live feed
//
// Bridge is the runtime's event listener (actors.WithEventListener). It
// never blocks the session that calls it: under its mutex it coalesces
// text deltas per session (CoalesceWindow: the deltas are concatenated into
// one event that carries the last delta's seq, so a subscriber that keeps up
// sees the whole text; any other
// event publishes the pending text first, so seq order holds), offers each
// item to every matching subscriber's bounded queue without waiting, and
// drops a subscriber whose queue is full (its stream ends with a
// `reconnect` event; the client reconnects with Last-Event-ID). After a
// status-affecting event it reads the record from the store (a trailing
// debounce of ChangedDebounce, so the write has landed; after `released`
// it retries until the store shows the session settled) and publishes it
// on code_session_changed. A driver's question to the human (a driven
// session's clarification its policy hands on) is published on
// code_session_question once the delegation's record holds it
// (question.go).
//
// An SSE stream (GET /api/events) registers its subscription before it
// replays the store after its cursor, so nothing published meanwhile is
// lost; live items at or below the cursor are dropped, and a live item
// whose first seq is past cursor+1 makes the stream read the missing
// events from the store first (LiveStep decides). Streams never poll the
// store: the runtime hands the listener each event once it is durable, in
// seq order per session, so a stream is woken by an event that, with
// every event before it, is already on disk. A live event is encoded once
// for all the streams it goes to, and a stream writes what is queued in
// batches with one flush each. So a client that reconnects
// with the last id it saw ("<sessionId>:<seq>") gets every event exactly
// once, in seq order; the live path merges runs of text deltas into one
// event each (the store keeps every delta, and a replay sends them).
//
// Metrics go into an injected registry: the runtime's code_session_*
// families (with the frozen code_specialist_* ones, which count driver
// delegations: actors/driver) and this package's SSE and HTTP families.
//
// # Lifecycle
//
//	NewDaemon --> serving --Shutdown--> draining (503) --> turns interrupted
//	  --> runtime closed (live records orphaned, backends stopped)
//	  --> bridge closed (pending published, streams told to reconnect)
//	  --> store closed
//
// # Concurrency
//
// Server and Bridge are safe for concurrent use. The bridge's mutex guards
// only maps and non-blocking channel sends; store reads happen on timer
// goroutines or the stream's own request goroutine.
//
// # Testing
//
// The tests run real servers on 127.0.0.1 (httptest) over a runtime with
// the scripted backend: every route and error code, auth on and off, body
// limits, path traversal in ids, the SSE replay/live handoff across a
// disconnect, text coalescing, and a slow subscriber dropped and
// reconnecting, a live feed forced to skip events. Server.stallLive lets a
// test hold a stream before it goes live, Server.afterSubscribe act between
// its subscription and its replay.
package controlplane
