package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strconv"

	"github.com/fencer-io/fencer/api/client/internal/transport"
	"github.com/fencer-io/fencer/api/client/internal/watch"
	"github.com/fencer-io/fencer/api/wire"
)

// FromNow, as Watch's since, starts the watch at the index the first member
// it reaches has applied: only changes from then on are delivered.
const FromNow = ^uint64(0)

// Watch streams the cluster's events (GET /v1/events) with an index above
// since, in log order, then follows new ones as they are applied; prefix,
// when not empty, keeps only locks and keys with that prefix. since is
// usually the Fencer-Index of a list (list, then watch: no gap, no
// duplicate), the index of the last event seen, or FromNow.
//
//	for ev, err := range c.Watch(ctx, "jobs.", client.FromNow) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(ev.Index, ev.Type, ev.Lock, ev.Token)
//	}
//
// Any member serves events from its own applied log, and every member emits
// the same events with the same indexes. So when a connection fails, the
// member goes away or cuts a slow reader off (lagged), Watch reconnects, to
// the next endpoint, with Last-Event-ID set to the last index it delivered
// in full: each event arrives once, in order, across reconnections. Event
// types this client does not know are delivered as they are; skip them.
//
// The sequence ends when ctx ends (yielding its error), when the loop
// stops, or with a final error: one wrapping ErrEventsCompacted when the
// members no longer keep the events after the last delivered index (an
// *APIError whose Index is the index to re-list at; re-list, then watch from
// the list's index), ErrUnavailable when Retry.Attempts connections in a row
// failed, or another *APIError (ErrForbidden, ErrInvalid, …).
func (c *Client) Watch(ctx context.Context, prefix string, since uint64) iter.Seq2[wire.Event, error] {
	return func(yield func(wire.Event, error) bool) {
		if err := watch.Run(ctx, c.tr, refusedWatch, prefix, since, yield); err != nil {
			yield(wire.Event{}, err)
		}
	}
}

// LocksAt returns every held lock and the log index the list was read at
// (Fencer-Index). Watch from that index then delivers every change after
// the list and none the list already shows: list, then watch.
func (c *Client) LocksAt(ctx context.Context) ([]wire.LockStatus, uint64, error) {
	var list wire.LockList
	index, err := c.getIndexed(ctx, &transport.Request{Method: http.MethodGet, Path: "/v1/locks"}, &list)
	return list.Locks, index, err
}

// getIndexed is a read whose answer carries the log index it was read at
// (Fencer-Index): it decodes the answer into out and returns the index.
func (c *Client) getIndexed(ctx context.Context, r *transport.Request, out any) (uint64, error) {
	resp, err := c.tr.Do(ctx, r)
	if err != nil {
		return 0, err
	}
	if err := c.tr.Decode(resp, out); err != nil {
		return 0, err
	}
	index, err := strconv.ParseUint(resp.Header.Get(wire.HeaderIndex), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %s: answer has no valid %s header", ErrBadAnswer, r.Method, r.Path, wire.HeaderIndex)
	}
	return index, nil
}

// refusedWatch reports whether a member refused a watch in a way no
// reconnection changes (an answer below 500: compacted, forbidden, invalid).
func refusedWatch(err error) bool {
	var api *APIError
	return errors.As(err, &api) && api.Status < 500
}
