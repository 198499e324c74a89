package coord

import "github.com/fencer-io/fencer/coord/events"

// Watch follows this node's events after since (see events.History.Watch). Any
// node serves it from its own applied state.
func (s *Service) Watch(since int64) (*events.Watcher, error) { return s.events.Watch(since) }
