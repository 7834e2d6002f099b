// Package cluster runs codesession as a cluster of nodes: sessions run on the
// node that holds their workspace and backend, and ops, listings and the
// live feed work from any node.
//
// Three parts, each on a library made for the job:
//
//   - The wire (wire.go) is hollywood's remote (drpc over TCP, mutual TLS
//     when certificates are configured, a raised buffer size). Exactly one
//     message type crosses it: anypb.Any{TypeUrl: "msgpack/<Type>", Value:
//     <msgpack>}, made and checked by one send wrapper (wire.send), so no
//     other value can reach hollywood's protobuf serializer (which crashes
//     the sending process on a non-proto value). A message of an unknown
//     type tag, a malformed body or any other proto value is logged and
//     answered with a typed error, never a crash.
//   - Membership (membership.go) is github.com/hashicorp/memberlist (SWIM
//     gossip): each node's metadata (node id, hollywood address, workspace
//     roots, backends, load) rides in memberlist's node meta; alive,
//     suspect and dead drive the session directory. Memberlist tells its
//     event delegate of joins and deaths but never of suspicion, so a peer
//     is suspect from the moment this node's own probe of it fails
//     (memberlist's failed-probe log line, membership.go) until a probe of
//     it is answered (its ping delegate), it refutes, or it is declared
//     dead; and each failed probe is gossiped as a memberlist user message
//     (suspicion.go), so the others mark it suspect too, naming the
//     suspecter, until the peer's refutation. Memberlist's keyring
//     encrypts gossip when a key is configured. Hollywood's SelfManaged
//     cluster provider is not used: it crashes the process on ordinary
//     network faults.
//   - Placement and routing (placement.go, calls.go, gateway.go): a start
//     goes to the least loaded node whose roots contain the cwd and that
//     has the backend (or the one a `node` option names); every other op is
//     forwarded to the owning node's actors.Runtime. The registry is not
//     changed: the cluster is a thin layer of one actor per node in front of
//     the runtime.
//
// Membership over time (join.go): every node retries its join addresses,
// and the gossip addresses of peers it learned of that died, with backoff
// (Consul's retry_join), so start order does not matter and partitions
// heal. Listings (directory.go) read a directory that membership and the
// feed keep current, never a fan-out per request. Remote session feeds
// (feed.go) replay and fill gaps from the owner. A request's scope
// (scope.go) crosses the wire with each call and is checked by the owner.
//
// Faults: remote delivery is at most once, so every call carries an id; a
// caller resends a call under the same id until it is answered, and the
// callee runs each id once and answers repeats from a cache (stop, answer by
// clarification id and start are therefore safe to retry). When a node's
// memberlist lease expires (it is declared dead) its sessions show as
// orphaned on the others; when it returns, its own boot marks them orphaned
// and serves them, and resume works there.
//
// Lifecycle of a peer, as a node sees it:
//
//	joined --(ping over the wire answered)--> verified --(a probe of it fails: ours, or gossiped)--> suspect --(dead)--> gone
//	  ^                                          ^                                                   |                   |
//	  |                                          +-------(our probe of it answered, or it refutes)---+                   |
//	  +--------------------------------- rejoin (new boot) ------------------------------------------------------------------+
//
// Only verified peers take placements and calls: a peer whose hollywood side
// cannot be reached (no valid certificate under mutual TLS) never becomes
// verified.
//
// Concurrency: a Node's methods are safe for concurrent use; its state is
// behind one mutex, and calls wait on their own reply channels, never inside
// an actor's Receive.
//
// Testing: cluster_test.go runs three nodes in one process on 127.0.0.1
// ports with the script backend; suspicion_test.go drives the rumor
// handling with no network; directory_test.go cuts a node's gossip off
// with a transport the test switches (cutTransport); wire_test.go fuzzes the envelope decoder
// and sends garbage; tls_test.go generates certificates in the test;
// cmd/codesession's cluster test runs three `codesession serve` processes.
// LoseFeedEnv (losefeed.go) is a test-only hook serve installs so that a
// multi-process test can make a node lose one remote feed message; a
// production node never sets it and warns loudly when it is set.
package cluster
