package history

// Watch is what a watcher of GET /v1/events saw through a whole run: the
// grants it was told of, in the order it received them, and the ranges of
// log indexes it could not see (the members no longer kept them when it
// asked: a restarted or wiped member, a restore).
type Watch struct {
	Grants []WatchedGrant `json:"grants"`
	// Events are the events the session checks read, in the order
	// received: every grant's end (released, expired, handed_off, voided
	// and the permit events), every permit grant, the session events and
	// every put (a lock-bound write past its session's end would be one).
	Events []WatchedEvent `json:"events,omitempty"`
	Gaps   []WatchGap     `json:"gaps,omitempty"`
	// Until is the last log index the watch is known to have covered: a
	// grant after it was applied after the watcher stopped.
	Until uint64 `json:"until"`
}

// WatchedGrant is one acquired or handed_off event: the new grant.
type WatchedGrant struct {
	Index  uint64 `json:"index"`
	Type   string `json:"type"`
	Lock   string `json:"lock"`
	Holder string `json:"holder,omitempty"`
	Token  uint64 `json:"token"`
	// Session is the session the grant lives under, if any.
	Session uint64 `json:"session,omitempty"`
}

// WatchedEvent is one event of Watch.Events, as wire.Event has it: Name is
// its lock or semaphore, Key a put's key; on a hand-off Token and Session
// are the new grant's and PrevToken and Reason the ended one's.
type WatchedEvent struct {
	Index     uint64 `json:"index"`
	Type      string `json:"type"`
	Name      string `json:"name,omitempty"`
	Key       string `json:"key,omitempty"`
	Token     uint64 `json:"token,omitempty"`
	PrevToken uint64 `json:"prev_token,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Session   uint64 `json:"session,omitempty"`
}

// WatchGap is the log indexes (After, Until] the watcher did not see.
type WatchGap struct {
	After uint64 `json:"after"`
	Until uint64 `json:"until"`
}
