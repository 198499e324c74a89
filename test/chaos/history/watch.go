package history

// Watch is what a watcher of GET /v1/events saw through a whole run: the
// grants it was told of, in the order it received them, and the ranges of
// log indexes it could not see (the members no longer kept them when it
// asked: a restarted or wiped member, a restore).
type Watch struct {
	Grants []WatchedGrant `json:"grants"`
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
}

// WatchGap is the log indexes (After, Until] the watcher did not see.
type WatchGap struct {
	After uint64 `json:"after"`
	Until uint64 `json:"until"`
}
