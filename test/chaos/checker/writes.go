package checker

import (
	"fmt"
	"slices"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// puts returns, per key, the put ops of h whose outcome satisfies keep.
func puts(h history.History, keep func(history.Outcome) bool) map[string][]history.Op {
	out := map[string][]history.Op{}
	for _, op := range h.Ops {
		if op.Kind == history.Put && keep(op.Outcome) {
			out[op.Target] = append(out[op.Target], op)
		}
	}
	return out
}

func acked(o history.Outcome) bool { return o == history.OK }

func mayHaveApplied(o history.Outcome) bool { return o == history.OK || o.Indeterminate() }

// FenceOrder finds writes a fence should have refused. From the resource's
// own log: each accepted write must be admitted over the one before it. From
// the clients' view: if put A was acknowledged before put B was called on the
// same key and both were acknowledged, B's stamp must come after A's.
func FenceOrder(h history.History) []Violation {
	var out []Violation
	candidates := puts(h, mayHaveApplied)
	for _, key := range sortedKeys(h.Accepted) {
		log := h.Accepted[key]
		if len(log) == 0 {
			continue
		}
		last := log[0]
		for i := 1; i < len(log); i++ {
			if !last.Admits(log[i]) {
				out = append(out, Violation{
					Message: fmt.Sprintf("%s: the resource accepted %s (write %d of its log) after already accepting %s",
						key, log[i], i, last),
					Ops: putsStamped(candidates[key], last, log[i]),
				})
			}
			if stampLess(last, log[i]) {
				last = log[i]
			}
		}
	}
	ok := puts(h, acked)
	for _, key := range sortedKeys(ok) {
		for _, r := range regressions(ok[key], history.Op.Stamp) {
			out = append(out, Violation{
				Message: fmt.Sprintf("%s: put %s was acknowledged although put %s had been acknowledged before it was called",
					key, r.later.Stamp(), r.earlier.Stamp()),
				Ops: []history.Op{r.earlier, r.later},
			})
		}
	}
	return out
}

// putsStamped returns the ops among ops carrying one of the stamps, as
// evidence of who made a write the resource logged.
func putsStamped(ops []history.Op, stamps ...history.Stamp) []history.Op {
	var out []history.Op
	for _, op := range ops {
		if slices.Contains(stamps, op.Stamp()) {
			out = append(out, op)
		}
	}
	return out
}

// NoLostWrite finds keys whose final read lost an acknowledged write. The
// final read must return a write that may have been applied (acknowledged or
// indeterminate), with a stamp no older than the newest acknowledged one; a
// key with acknowledged writes must have a final read and must be found.
// A nil h.FinalReads means no final reads were taken: nothing to check.
func NoLostWrite(h history.History) []Violation {
	if h.FinalReads == nil {
		return nil
	}
	final := map[string]history.FinalRead{}
	for _, r := range h.FinalReads {
		final[r.Key] = r
	}
	applied := puts(h, mayHaveApplied)
	ok := puts(h, acked)
	keys := sortedKeys(ok)
	for k := range final {
		if _, seen := ok[k]; !seen {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []Violation
	for _, key := range keys {
		var newest *history.Op
		for i, op := range ok[key] {
			if newest == nil || stampLess(newest.Stamp(), op.Stamp()) {
				newest = &ok[key][i]
			}
		}
		r, read := final[key]
		switch {
		case !read && newest != nil:
			out = append(out, Violation{
				Message: fmt.Sprintf("%s: no final read, but writes to it were acknowledged", key),
				Ops:     []history.Op{*newest},
			})
		case !read:
		case !r.Found && newest != nil:
			out = append(out, Violation{
				Message: fmt.Sprintf("%s: final read found nothing, but %s was acknowledged", key, newest.Stamp()),
				Ops:     []history.Op{*newest},
			})
		case !r.Found:
		case !madeBy(applied[key], r):
			out = append(out, Violation{
				Message: fmt.Sprintf("%s: final read returned %q %s, which no acknowledged or indeterminate put wrote",
					key, r.Value, r.Stamp()),
				Ops: putsStamped(applied[key], r.Stamp()),
			})
		case newest != nil && stampLess(r.Stamp(), newest.Stamp()):
			out = append(out, Violation{
				Message: fmt.Sprintf("%s: final read returned %s, older than the acknowledged %s", key, r.Stamp(), newest.Stamp()),
				Ops:     append(putsStamped(applied[key], r.Stamp()), *newest),
			})
		}
	}
	return out
}

func madeBy(ops []history.Op, r history.FinalRead) bool {
	for _, op := range ops {
		if op.Stamp() == r.Stamp() && op.Value == r.Value {
			return true
		}
	}
	return false
}
