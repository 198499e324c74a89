package checker

import (
	"fmt"
	"slices"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// An election is a lock whose holder publishes a value; its token is the
// leader's term of office. Two rules are checked from what campaigners
// were granted and what observers saw.

// leaderClaim is one source's word on who led a term.
type leaderClaim struct {
	election, holder string
	op               *history.Op
	obs              *history.Observation
}

func (c leaderClaim) evidence(v *Violation) {
	if c.op != nil {
		v.Ops = append(v.Ops, *c.op)
	}
	if c.obs != nil {
		v.Observations = append(v.Observations, *c.obs)
	}
}

// OneLeaderPerTerm finds terms with two leaders: a token granted by a
// campaign or seen by an observer must name one election and one holder
// wherever it appears. When the history holds the campaigns, it also finds
// values observed for a term that its leader never published: the
// campaign's own value or a proclaim under that token that may have taken
// effect.
func OneLeaderPerTerm(h history.History) []Violation {
	first := map[uint64]leaderClaim{}
	reported := map[uint64]bool{}
	var out []Violation
	claim := func(token uint64, c leaderClaim) {
		f, seen := first[token]
		switch {
		case !seen:
			first[token] = c
		case (f.election != c.election || f.holder != c.holder) && !reported[token]:
			reported[token] = true
			v := Violation{Message: fmt.Sprintf("term t%d has two leaders: %s on %s and %s on %s",
				token, f.holder, f.election, c.holder, c.election)}
			f.evidence(&v)
			c.evidence(&v)
			out = append(out, v)
		}
	}
	type who struct{ election, holder string }
	type term struct {
		election string
		token    uint64
	}
	published := map[who][]string{}
	proclaimed := map[term][]string{}
	campaigns := false
	for i, op := range h.Ops {
		switch op.Kind {
		case history.Campaign:
			campaigns = true
			published[who{op.Target, op.Holder}] = append(published[who{op.Target, op.Holder}], op.Value)
			if op.Outcome == history.OK {
				claim(op.Token, leaderClaim{election: op.Target, holder: op.Holder, op: &h.Ops[i]})
			}
		case history.Proclaim:
			if op.Outcome == history.OK || op.Outcome.Indeterminate() {
				proclaimed[term{op.Target, op.Token}] = append(proclaimed[term{op.Target, op.Token}], op.Value)
			}
		}
	}
	for i, o := range h.Observations {
		claim(o.Token, leaderClaim{election: o.Election, holder: o.Holder, obs: &h.Observations[i]})
		if campaigns && !slices.Contains(published[who{o.Election, o.Holder}], o.Value) &&
			!slices.Contains(proclaimed[term{o.Election, o.Token}], o.Value) {
			out = append(out, Violation{
				Message: fmt.Sprintf("%s: t%d was seen publishing %q, which %s never published in that term",
					o.Election, o.Token, o.Value, o.Holder),
				Observations: []history.Observation{o},
			})
		}
	}
	return out
}

// ObserverOrder finds observers that saw an election out of term order.
// Each observer's sequence for an election must move forward: to a greater
// token, or to a new value in the same term. Seeing a (term, value) again
// is allowed only as the first sighting of a new session, which reports
// the leader as it is then, and only if it was the last one seen; any
// other repeat means the observer saw a term twice or went back in time.
// This assumes every publish of a term carries a value of its own, as the
// chaos workload's do.
func ObserverOrder(h history.History) []Violation {
	type stream struct {
		observer int
		election string
	}
	type sighting struct {
		token uint64
		value string
	}
	last := map[stream]history.Observation{}
	seen := map[stream]map[sighting]bool{}
	var out []Violation
	for _, o := range h.Observations {
		s := stream{o.Observer, o.Election}
		prev, ok := last[s]
		last[s] = o
		if seen[s] == nil {
			seen[s] = map[sighting]bool{}
		}
		here := sighting{o.Token, o.Value}
		again := seen[s][here]
		seen[s][here] = true
		if !ok {
			continue
		}
		var why string
		switch {
		case o.Token < prev.Token:
			why = fmt.Sprintf("went back from t%d to t%d", prev.Token, o.Token)
		case o.Token == prev.Token && o.Value == prev.Value && o.Session == prev.Session:
			why = fmt.Sprintf("saw t%d with %q twice in a row", o.Token, o.Value)
		case again && !(o.Session != prev.Session && o.Token == prev.Token && o.Value == prev.Value):
			why = fmt.Sprintf("saw t%d with %q again after moving on", o.Token, o.Value)
		default:
			continue
		}
		out = append(out, Violation{
			Message:      fmt.Sprintf("observer %d on %s %s", o.Observer, o.Election, why),
			Observations: []history.Observation{prev, o},
		})
	}
	return out
}
