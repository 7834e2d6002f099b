// Package lessons is the lesson half of the learning loop (seed 000 §7 with
// seed 004's evidence discipline): the lesson book in
// $CODESESSION_HOME/learning/lessons.json, the distillation pass that grows
// it from new outcomes through a configured cheap model, and the low-trust
// injection block a driver's first message carries.
//
// The numbers are exported tunables: a new lesson starts at confidence
// NewConfidence (0.6); each independent support adds ReinforceStep (0.1)
// and one to its evidence; confidence decays by DecayPerWeek (0.95) per
// whole week since the last reinforcement, computed from that
// reinforcement each time (non-compounding: a pass run daily or hourly
// decays exactly as much as one run weekly); a lesson below EvictBelow
// (0.3) is evicted; at most MaxLessons (40) survive a pass, lowest
// confidence dropped first; a lesson is at most MaxLessonChars (300)
// characters.
//
// Evidence counts only independent support: an outcome supports a lesson
// at most once per session AND per repository revision (two acceptances
// at the same HEAD are one piece of evidence), and an outcome without a
// revision (outside git) supports nothing: fail closed. Only lessons with
// evidence >= InjectMinEvidence (2) are injected.
//
// The pass (Pass) decays, reads outcomes after the book's cursor, asks the
// model (Model: a thin client on the Anthropic and OpenAI Go SDKs, the
// native backend's) with a prompt that forbids posture or escalation
// advice, parses the answer strictly (anything malformed is dropped with a
// warning; an answer that is not the asked-for JSON fails the pass),
// upserts, evicts, caps, advances the cursor and persists atomically
// (temp file, fsync, rename, fsync dir) under an exclusive flock. A failed
// pass changes nothing and says why.
//
// Injector renders the block: lessons with evidence >= 2 whose scope
// matches the filter (backend-scoped lessons never match an unknown
// backend), wrapped as untrusted data, at most MaxBlockBytes (1,536)
// bytes with the lowest confidence dropped first, byte-stable for
// InjectionTTL (5 minutes) per filter, "" when nothing qualifies.
//
// Concurrency: Book values are plain data; Store and Injector are safe for
// concurrent use; Pass is serialised by the store's lock. Every function
// takes its clock as an argument; tests use fixed times, a fake Model and
// transports/modelmock.
package lessons
