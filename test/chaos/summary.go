package chaos

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// Summary renders the run for a human: what was injected, what the clients
// saw, the tokens issued, and each check's verdict.
func (r *Result) Summary() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "chaos run: seed %d, %d nodes, %d clients (%d on locks, %d on semaphore %s of limit %d, %d campaigning in election %s, "+
		"%d holding %s and a permit of %s under sessions, %d taking %s shared or exclusive, %d queueing durably for %s), %v of faults (%v in all)\n",
		c.Seed, c.Nodes, len(c.workloads()), c.Clients, max(c.SemClients, 0), semaphore, c.SemLimit, max(c.Campaigners, 0), election,
		max(c.SessionClients, 0), strings.Join(sessionLocks, ","), sessionSemaphore, max(c.RWClients, 0), strings.Join(rwLocks, ","),
		max(c.DurableClients, 0), strings.Join(durableLocks, ","), c.Duration, r.Elapsed.Round(1e6))
	if c.LogStore != "" {
		fmt.Fprintf(&b, "log store: %s\n", c.LogStore)
	}
	if c.Broken != "" {
		fmt.Fprintf(&b, "resource: deliberately broken (%s)\n", c.Broken)
	}

	fmt.Fprintf(&b, "faults injected: %s\n", counts(r.Faults))
	fmt.Fprintf(&b, "  stacked: %s\n", counts(r.Stacked))
	fmt.Fprintf(&b, "  did not complete: %s\n", counts(r.Incomplete))
	if c.Witness != "" {
		fmt.Fprintf(&b, "  witness: %s, spared from kills, wipes and removals\n", c.Witness)
	}
	b.WriteString(r.httpLine())

	b.WriteString(r.operations())
	b.WriteString(r.observations())
	b.WriteString(r.watched())

	b.WriteString(r.refusalCodes())
	b.WriteString(r.otherErrors())

	b.WriteString(r.tokensAndWrites())
	b.WriteString(r.lateWrites())
	b.WriteString(r.sessions())
	b.WriteString(r.multiLocks())

	fmt.Fprintf(&b, "member digests: %d members", len(r.History.MemberHashes))
	seen := map[string]bool{}
	for _, d := range r.History.MemberHashes {
		seen[d] = true
	}
	fmt.Fprintf(&b, ", %d distinct\n", len(seen))

	b.WriteString(r.Soak.String(c.Duration))
	b.WriteString(r.Report.String())
	if len(r.Problems) > 0 {
		fmt.Fprintf(&b, "harness problems: %d\n", len(r.Problems))
		for _, p := range r.Problems {
			fmt.Fprintf(&b, "  - %s\n", p)
		}
	}
	if len(r.ArtifactPaths) > 0 {
		fmt.Fprintf(&b, "artifacts: %s\n", strings.Join(r.ArtifactPaths, " "))
	}
	return b.String()
}

// operations counts the ops by kind and outcome.
func (r *Result) operations() string {
	var b strings.Builder
	h := r.History
	byKind := map[history.OpKind]map[history.Outcome]int{}
	for _, op := range h.Ops {
		if byKind[op.Kind] == nil {
			byKind[op.Kind] = map[history.Outcome]int{}
		}
		byKind[op.Kind][op.Outcome]++
	}
	fmt.Fprintf(&b, "operations: %d\n", len(h.Ops))
	for _, kind := range []history.OpKind{history.Acquire, history.Renew, history.Release, history.Read, history.Put, history.Get,
		history.SemAcquire, history.SemRenew, history.SemRelease, history.Campaign, history.Proclaim, history.Resign,
		history.SessionCreate, history.SessionRenew, history.SessionClose, history.MultiAcquire, history.MultiRenew, history.MultiRelease,
		history.Revoke, history.RWAcquire, history.RWRelease} {
		var parts []string
		n := 0
		for _, o := range []history.Outcome{history.OK, history.LockHeld, history.SemaphoreFull, history.LockDelay, history.LeaseLost, history.StaleToken,
			history.NotLockHolder, history.SessionExpired, history.Revoked, history.Refused, history.Unknown, history.OtherError} {
			if k := byKind[kind][o]; k > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", o, k))
				n += k
			}
		}
		fmt.Fprintf(&b, "  %-14s %6d: %s\n", kind, n, strings.Join(parts, ", "))
	}
	return b.String()
}

// tokensAndWrites tells the range of the tokens granted and how many
// writes the resource accepted.
func (r *Result) tokensAndWrites() string {
	var b strings.Builder
	h := r.History
	var tokens []uint64
	for _, op := range h.Ops {
		if (op.Kind == history.Acquire || op.Kind == history.SemAcquire || op.Kind == history.Campaign) && op.Outcome == history.OK {
			tokens = append(tokens, op.Token)
		}
	}
	if len(tokens) > 0 {
		fmt.Fprintf(&b, "tokens issued: %d grants seen, t%d .. t%d\n", len(tokens), slices.Min(tokens), slices.Max(tokens))
	} else {
		b.WriteString("tokens issued: none seen\n")
	}
	accepted := 0
	for _, log := range h.Accepted {
		accepted += len(log)
	}
	fmt.Fprintf(&b, "resource accepted %d writes on %d keys\n", accepted, len(h.Accepted))
	return b.String()
}

// lateWrites tells what became of the writes paused clients made with
// their old token after they woke up: the seed's scenario.
func (r *Result) lateWrites() string {
	count := map[history.Outcome]int{}
	events := r.History.Events
	for i, e := range events {
		var client int
		var lock string
		var token uint64
		if _, err := fmt.Sscanf(e.Description, "SIGSTOP client %d holding %s t%d", &client, &lock, &token); err != nil {
			continue
		}
		resumed := int64(-1)
		for _, later := range events[i+1:] {
			if later.Description == fmt.Sprintf("SIGCONT client %d", client) {
				resumed = later.Time
				break
			}
		}
		if resumed < 0 {
			continue
		}
		for _, op := range r.History.Ops {
			if op.Client == client && op.Kind == history.Put && op.Token == token && op.Call > resumed {
				count[op.Outcome]++
			}
		}
	}
	if len(count) == 0 {
		return "writes by paused clients after waking: none\n"
	}
	return fmt.Sprintf("writes by paused clients after waking: %d refused (stale %d, not holder %d, other %d), %d accepted, %d unknown\n",
		count[history.StaleToken]+count[history.NotLockHolder]+count[history.Refused],
		count[history.StaleToken], count[history.NotLockHolder], count[history.Refused],
		count[history.OK], count[history.Unknown]+count[history.OtherError])
}

// refusalCodes counts the answers that carried an error code, by code and
// then by kind of op, most frequent first. A code on an indeterminate op
// (a put refused after an attempt whose answer was lost, a no_leader after
// the last retry) is counted apart: it is what the service said, not what
// the checker took it to mean.
func (r *Result) refusalCodes() string {
	type tally struct {
		total, indeterminate int
		byKind               map[history.OpKind]int
	}
	byCode := map[string]*tally{}
	for _, op := range r.History.Ops {
		if op.Code == "" {
			continue
		}
		t := byCode[op.Code]
		if t == nil {
			t = &tally{byKind: map[history.OpKind]int{}}
			byCode[op.Code] = t
		}
		t.total++
		t.byKind[op.Kind]++
		if op.Outcome.Indeterminate() {
			t.indeterminate++
		}
	}
	if len(byCode) == 0 {
		return "answers with an error code: none\n"
	}
	codes := make([]string, 0, len(byCode))
	for code := range byCode {
		codes = append(codes, code)
	}
	slices.SortFunc(codes, func(a, b string) int {
		if c := byCode[b].total - byCode[a].total; c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	b.WriteString("answers with an error code (code, count: by kind):\n")
	for _, code := range codes {
		t := byCode[code]
		kinds := make([]string, 0, len(t.byKind))
		for kind, k := range t.byKind {
			kinds = append(kinds, fmt.Sprintf("%s %d", kind, k))
		}
		slices.Sort(kinds)
		fmt.Fprintf(&b, "  %-22s %6d: %s", code, t.total, strings.Join(kinds, ", "))
		if t.indeterminate > 0 {
			fmt.Fprintf(&b, " (%d on indeterminate ops)", t.indeterminate)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// counts renders name×count pairs, sorted by name, or "none".
func counts(m map[string]int) string {
	total := 0
	var parts []string
	for name, k := range m {
		total += k
		parts = append(parts, fmt.Sprintf("%s×%d", name, k))
	}
	if total == 0 {
		return "none"
	}
	slices.Sort(parts)
	return fmt.Sprintf("%d: %s", total, strings.Join(parts, ", "))
}

// httpLine tells who dialed the nodes' advertised HTTP addresses and what
// the HTTP cuts stopped: the evidence that they cut anything.
func (r *Result) httpLine() string {
	var nodes, clients int64
	for source, k := range r.Gated {
		switch {
		case source == "":
		case strings.HasPrefix(source, "client-"):
			clients += k
		default:
			nodes += k
		}
	}
	s := r.HTTPStats
	return fmt.Sprintf("http via advertised addresses: %d connections from nodes, %d from clients, %d unattributed (unfaulted); "+
		"cuts refused %d connections and dropped %d bytes\n",
		nodes, clients, r.Gated[""], s.Rejected, s.Dropped[0]+s.Dropped[1])
}

// otherErrors lists the distinct answers outside the workload's model
// (OtherError), which the checker treats as indeterminate: each may be
// worth a look.
func (r *Result) otherErrors() string {
	seen := map[string]int{}
	var order []string
	for _, op := range r.History.Ops {
		if op.Outcome != history.OtherError {
			continue
		}
		key := fmt.Sprintf("%s: %s", op.Kind, op.Error)
		if seen[key] == 0 {
			order = append(order, key)
		}
		seen[key]++
	}
	if len(order) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("answers outside the model (indeterminate):\n")
	for _, key := range order[:min(len(order), 5)] {
		fmt.Fprintf(&b, "  %d× %s\n", seen[key], truncate(key, 200))
	}
	if len(order) > 5 {
		fmt.Fprintf(&b, "  … and %d more kinds\n", len(order)-5)
	}
	return b.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// watched summarizes what the events watcher saw: the grants, up to which
// index, and the ranges it could not see.
func (r *Result) watched() string {
	w := r.History.Watch
	if w == nil {
		return "events watcher: none\n"
	}
	var unseen uint64
	for _, g := range w.Gaps {
		unseen += g.Until - g.After
	}
	return fmt.Sprintf("events watcher: %d grants through index %d, %d gaps (%d indexes) the members no longer kept\n", len(w.Grants), w.Until, len(w.Gaps), unseen)
}

// observations summarizes what the election observers saw: how many
// sightings, of how many terms, over how many watch sessions.
func (r *Result) observations() string {
	obs := r.History.Observations
	if len(obs) == 0 {
		return "election observers: nothing seen\n"
	}
	terms := map[uint64]bool{}
	sessions := map[[2]int]bool{}
	for _, o := range obs {
		terms[o.Token] = true
		sessions[[2]int{o.Observer, o.Session}] = true
	}
	return fmt.Sprintf("election observers: %d sightings of %d terms in %d watch sessions\n", len(obs), len(terms), len(sessions))
}

// sessions tells what became of the sessions: how many were opened and how
// they ended as the clients and the watcher saw it, the grants held under
// them, and the lock-bound writes sent with their tokens after a client was
// told the session had ended, which must all have been refused.
func (r *Result) sessions() string {
	h := r.History
	var opened, closed, expiredAnswers, locks, permits int
	session := map[uint64]uint64{} // grant token → its session
	known := map[uint64]int64{}    // session → when a client was first told it ended
	for _, op := range h.Ops {
		switch {
		case op.Kind == history.SessionCreate && op.Outcome == history.OK:
			opened++
		case op.Session != 0 && op.Outcome == history.OK && op.Kind == history.Acquire:
			locks++
			session[op.Token] = op.Session
		case op.Session != 0 && op.Outcome == history.OK && op.Kind == history.SemAcquire:
			permits++
			session[op.Token] = op.Session
		}
		told := op.Kind == history.SessionClose && op.Outcome == history.OK || op.Session != 0 && op.Outcome == history.SessionExpired
		if op.Kind == history.SessionClose && op.Outcome == history.OK {
			closed++
		}
		if op.Kind == history.SessionRenew && op.Outcome == history.SessionExpired {
			expiredAnswers++
		}
		if at, seen := known[op.Session]; told && (!seen || op.Return < at) {
			known[op.Session] = op.Return
		}
	}
	if opened == 0 {
		return "sessions: none opened\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "sessions: %d opened, %d closed ok, %d renewals refused session_expired; %d locks and %d permits granted under them\n",
		opened, closed, expiredAnswers, locks, permits)
	if w := h.Watch; w != nil {
		ends := map[string]int{}
		for _, e := range w.Events {
			if e.Type == wire.EventSessionClosed || e.Type == wire.EventSessionExpired {
				ends[e.Type]++
			}
		}
		fmt.Fprintf(&b, "  session ends watched: %d closed, %d expired\n", ends[wire.EventSessionClosed], ends[wire.EventSessionExpired])
	}
	late := map[history.Outcome]int{}
	for _, op := range h.Ops {
		s, under := session[op.Token]
		if op.Kind != history.Put || op.Lock == "" || !under {
			continue
		}
		if at, ok := known[s]; ok && op.Call > at {
			late[op.Outcome]++
		}
	}
	fmt.Fprintf(&b, "  lock-bound writes sent after a client was told their session ended: %d refused (not holder %d, stale %d, other %d), %d accepted, %d unknown\n",
		late[history.NotLockHolder]+late[history.StaleToken]+late[history.Refused], late[history.NotLockHolder], late[history.StaleToken], late[history.Refused],
		late[history.OK], late[history.Unknown]+late[history.OtherError])
	return b.String()
}

// multiLocks tells what became of the multi-locks: granted (and with how
// many names), refused, released, and found ended by their expiry (a
// release answered lease_lost after a stall), and the ends the watcher saw
// by index: each must end every name at one.
func (r *Result) multiLocks() string {
	var granted, names, held, released, lost int
	multi := map[uint64]bool{}
	for _, op := range r.History.Ops {
		switch {
		case op.Kind == history.MultiAcquire && op.Outcome == history.OK:
			granted++
			names += len(op.Names)
			multi[op.Token] = true
		case op.Kind == history.MultiAcquire && op.Outcome == history.LockHeld:
			held++
		case op.Kind == history.MultiRelease && op.Outcome == history.OK:
			released++
		case op.Kind == history.MultiRelease && op.Outcome == history.LeaseLost:
			lost++
		}
	}
	if granted+held == 0 {
		return "multi-locks: none taken\n"
	}
	out := fmt.Sprintf("multi-locks: %d granted (%d names), %d refused lock_held, %d released ok, %d found ended (lease_lost)\n",
		granted, names, held, released, lost)
	if w := r.History.Watch; w != nil {
		ends := map[uint64]map[uint64]bool{}
		for _, e := range w.Events {
			if (e.Type == wire.EventReleased || e.Type == wire.EventExpired) && multi[e.Token] {
				if ends[e.Token] == nil {
					ends[e.Token] = map[uint64]bool{}
				}
				ends[e.Token][e.Index] = true
			}
		}
		one := 0
		for _, at := range ends {
			if len(at) == 1 {
				one++
			}
		}
		out += fmt.Sprintf("  multi-lock ends watched: %d, %d of them at one index\n", len(ends), one)
	}
	return out
}
