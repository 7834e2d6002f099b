package cluster

// LoseFeedEnv names a test-only environment variable, read by `codesession
// serve` on a cluster node: CODESESSION_TEST_LOSE_FEED=N makes the node
// lose the Nth live feed message of each session that arrives while a
// remote feed of that session (GET /api/events?sessionId=) is followed
// here (live: past the owner's last seq when the feed began; an older
// message still in flight from before the follow is not counted), as
// hollywood's at-most-once remote may lose one. It lets a multi-process test
// show that a remote feed fills the gap from the owner; an IP relay cannot
// lose one wire message (TCP resends it) and a reset connection loses an
// unknown number. Never set it on a real cluster: the daemon logs a warning
// at start and at each loss.
const LoseFeedEnv = "CODESESSION_TEST_LOSE_FEED"

// LoseFollowedFeed makes n lose the nth live feed message (1-based) of
// each session that arrives while a remote feed of the session is followed
// here; see LoseFeedEnv. For tests only.
func (n *Node) LoseFollowedFeed(nth int) {
	seen := map[string]int{} // session -> followed feed messages arrived (under n.mu)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dropFeed = func(f *Feed) bool { // called with n.mu held
		followed := false
		for s := range n.subs {
			// counted only once live: under load, messages of events from
			// before the follow (the replay's) can still arrive after it
			if s.sid == f.SessionID && s.live && f.Event.Seq > s.liveAfter {
				followed = true
				break
			}
		}
		if !followed {
			return false
		}
		seen[f.SessionID]++
		if seen[f.SessionID] != nth {
			return false
		}
		n.log.Warn("cluster: test hook "+LoseFeedEnv+" lost a feed message", "session", f.SessionID, "seq", f.Event.Seq)
		return true
	}
}
