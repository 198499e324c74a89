package checker

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fencer-io/fencer/test/chaos/checker/model"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// Names of the checks, as they appear in a Report.
const (
	CheckHistory      = "well-formed history"
	CheckLocks        = "lock linearizability"
	CheckKeys         = "fenced key linearizability"
	CheckUniqueGrants = "unique grants"
	CheckGrantOrder   = "grant order"
	CheckUnseenGrants = "unseen grants"
	CheckEpochTokens  = "tokens across epochs"
	CheckFenceOrder   = "fence order"
	CheckNoLostWrite  = "no lost write"
	CheckMemberHashes = "member state hashes"
	CheckPermits      = "semaphore limits"
	CheckLeaders      = "one leader per term"
	CheckObservers    = "observers in term order"
	CheckWatch        = "watched grants"
	CheckUnissued     = "no false unissued_token"

	CheckSessionEnds      = "session grants end together"
	CheckSessionWrites    = "no lock-bound write after its session"
	CheckSessionSurvivors = "no grant outlives its session"

	CheckMultiGrants   = "multi-grants are one grant"
	CheckRevokedWrites = "no lock-bound write after its revoke"
	CheckRWExclusion   = "exclusive grants overlap none"
	CheckDurableOrder  = "durable waiters in enqueue order"
)

// DefaultTimeout bounds each linearizability search when Options.Timeout is
// zero.
const DefaultTimeout = time.Minute

// Options tunes Check. The zero value means the defaults.
type Options struct {
	// Timeout bounds each porcupine search; the search is NP-hard and a
	// long, highly concurrent history can exhaust any budget. Zero means
	// DefaultTimeout, negative means no bound. A search that runs out
	// yields an Inconclusive verdict, never a Pass.
	Timeout time.Duration
}

func (o Options) timeout() time.Duration {
	switch {
	case o.Timeout == 0:
		return DefaultTimeout
	case o.Timeout < 0:
		return 0 // porcupine reads zero as no bound
	}
	return o.Timeout
}

// Status is the outcome of one check.
type Status string

// Statuses. Inconclusive means the search ran out of time; Skipped means the
// history carries no input for the check.
const (
	Pass         Status = "pass"
	Fail         Status = "fail"
	Inconclusive Status = "inconclusive"
	Skipped      Status = "skipped"
)

// Violation is one broken rule with the evidence for it.
type Violation struct {
	Message      string                `json:"message"`
	Ops          []history.Op          `json:"ops,omitempty"`
	Events       []history.Event       `json:"events,omitempty"`
	Observations []history.Observation `json:"observations,omitempty"`
}

// Verdict is the result of one check.
type Verdict struct {
	Name       string      `json:"name"`
	Status     Status      `json:"status"`
	Note       string      `json:"note,omitempty"`
	Violations []Violation `json:"violations,omitempty"`
}

// OK reports whether the check found nothing wrong and finished.
func (v Verdict) OK() bool { return v.Status == Pass || v.Status == Skipped }

// Report is the result of Check.
type Report struct {
	Verdicts []Verdict

	history history.History
	runs    []*linearization
}

// Check runs every check on h: porcupine on the lock and fenced key models,
// then each whole-history invariant. A malformed history is reported as
// such and nothing else is checked, since no verdict on it would mean much.
func Check(h history.History, opts Options) Report {
	r := Report{history: h}
	if err := h.Validate(); err != nil {
		r.Verdicts = []Verdict{{Name: CheckHistory, Status: Fail, Violations: []Violation{{Message: err.Error()}}}}
		return r
	}
	r.Verdicts = append(r.Verdicts, Verdict{Name: CheckHistory, Status: Pass})
	for _, m := range []struct {
		name  string
		model porcupine.Model
		keep  func(history.OpKind) bool
	}{
		{CheckLocks, model.Lock, onLock},
		{CheckKeys, model.Key, onKey},
	} {
		v, run := checkLinearizable(m.name, m.model, h, m.keep, opts.timeout())
		r.Verdicts = append(r.Verdicts, v)
		if run != nil {
			r.runs = append(r.runs, run)
		}
	}
	r.Verdicts = append(r.Verdicts,
		invariant(CheckUniqueGrants, UniqueGrants(h), ""),
		invariant(CheckGrantOrder, GrantOrder(h), ""),
		invariant(CheckUnseenGrants, UnseenGrants(h), ""),
		invariant(CheckEpochTokens, EpochTokens(h), skipIf(!hasEpoch(h.Events), "no restart, restore or replacement")),
		invariant(CheckFenceOrder, FenceOrder(h), ""),
		invariant(CheckNoLostWrite, NoLostWrite(h), skipIf(h.FinalReads == nil, "no final reads")),
		invariant(CheckMemberHashes, MemberHashes(h), skipIf(len(h.MemberHashes) == 0, "no member hashes")),
		invariant(CheckPermits, PermitLimits(h), skipIf(!hasKind(h, history.SemAcquire), "no semaphore permits")),
		invariant(CheckLeaders, OneLeaderPerTerm(h), skipIf(!hasKind(h, history.Campaign) && len(h.Observations) == 0, "no election")),
		invariant(CheckObservers, ObserverOrder(h), skipIf(len(h.Observations) == 0, "no observations")),
		invariant(CheckWatch, WatchedGrants(h), skipIf(h.Watch == nil, "no watcher")),
		invariant(CheckUnissued, FalseUnissued(h), skipIf(!hasCodes(h), "no error codes recorded")),
		invariant(CheckSessionEnds, SessionGrantsEnd(h), skipIf(!hasSession(h), "no session opened")),
		invariant(CheckSessionWrites, SessionWrites(h), skipIf(!hasSession(h), "no session opened")),
		invariant(CheckSessionSurvivors, SessionSurvivors(h), skipIf(!hasSession(h), "no session opened")),
		invariant(CheckMultiGrants, MultiGrants(h), skipIf(!hasKind(h, history.MultiAcquire) || h.Watch == nil, "no multi-lock, or no watcher")),
		invariant(CheckRevokedWrites, RevokedWrites(h), skipIf(!hasRevoke(h), "no revoke")),
		invariant(CheckRWExclusion, RWExclusion(h), skipIf(!hasKind(h, history.RWAcquire), "no lock taken in a mode")),
		invariant(CheckDurableOrder, DurableOrder(h), skipIf(!hasDurable(h), "no durable waiter granted")),
	)
	return r
}

func invariant(name string, vs []Violation, skip string) Verdict {
	switch {
	case len(vs) > 0:
		return Verdict{Name: name, Status: Fail, Violations: vs}
	case skip != "":
		return Verdict{Name: name, Status: Skipped, Note: skip}
	}
	return Verdict{Name: name, Status: Pass}
}

func skipIf(cond bool, why string) string {
	if cond {
		return why
	}
	return ""
}

func hasKind(h history.History, kind history.OpKind) bool {
	for _, op := range h.Ops {
		if op.Kind == kind {
			return true
		}
	}
	return false
}

// hasSession reports whether a client was given a session: what the
// session checks judge.
func hasSession(h history.History) bool {
	for _, op := range h.Ops {
		if op.Kind == history.SessionCreate && op.Outcome == history.OK {
			return true
		}
	}
	return false
}

func hasEpoch(events []history.Event) bool {
	for _, e := range events {
		if e.Kind.IsEpoch() {
			return true
		}
	}
	return false
}

// OK reports whether every check passed or was skipped. An inconclusive
// search is not OK: nothing was verified.
func (r Report) OK() bool {
	for _, v := range r.Verdicts {
		if !v.OK() {
			return false
		}
	}
	return true
}

// Verdict returns the verdict of the named check.
func (r Report) Verdict(name string) (Verdict, bool) {
	for _, v := range r.Verdicts {
		if v.Name == name {
			return v, true
		}
	}
	return Verdict{}, false
}

// maxShown bounds the violations String prints per check; the artifacts
// hold the full history.
const maxShown = 10

// String summarizes the report: one line per check, then the violations.
func (r Report) String() string {
	var b strings.Builder
	failed := 0
	for _, v := range r.Verdicts {
		if !v.OK() {
			failed++
		}
	}
	if failed == 0 {
		fmt.Fprintf(&b, "history of %d ops: all %d checks passed\n", len(r.history.Ops), len(r.Verdicts))
	} else {
		fmt.Fprintf(&b, "history of %d ops: %d of %d checks not OK\n", len(r.history.Ops), failed, len(r.Verdicts))
	}
	for _, v := range r.Verdicts {
		fmt.Fprintf(&b, "  %-13s %s", strings.ToUpper(string(v.Status)), v.Name)
		if v.Note != "" {
			fmt.Fprintf(&b, " (%s)", v.Note)
		}
		b.WriteByte('\n')
		for i, vi := range v.Violations {
			if i == maxShown {
				fmt.Fprintf(&b, "    ... and %d more\n", len(v.Violations)-maxShown)
				break
			}
			fmt.Fprintf(&b, "    - %s\n", vi.Message)
			for _, e := range vi.Events {
				fmt.Fprintf(&b, "        event %s at %d: %s\n", e.Kind, e.Time, e.Description)
			}
			for _, op := range vi.Ops {
				fmt.Fprintf(&b, "        %s\n", op)
			}
			for _, o := range vi.Observations {
				fmt.Fprintf(&b, "        %s\n", o)
			}
		}
	}
	return b.String()
}

// WriteArtifacts writes into dir the history as history.json, the summary as
// report.txt and, for each model whose check did not pass, porcupine's HTML
// visualization of the history and its longest linearizations. It returns
// the paths written.
func (r Report) WriteArtifacts(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	path := filepath.Join(dir, "history.json")
	if err := r.history.WriteFile(path); err != nil {
		return paths, err
	}
	paths = append(paths, path)
	path = filepath.Join(dir, "report.txt")
	if err := os.WriteFile(path, []byte(r.String()), 0o644); err != nil {
		return paths, err
	}
	paths = append(paths, path)
	for _, run := range r.runs {
		if run.result == porcupine.Ok {
			continue
		}
		path := filepath.Join(dir, strings.ReplaceAll(run.name, " ", "-")+".html")
		if err := porcupine.VisualizePath(run.model, run.info, path); err != nil {
			return paths, fmt.Errorf("visualize %s: %w", run.name, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}
