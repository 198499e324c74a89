package checker

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// validRun is a small but complete history of a correct run: contention,
// implicit expiry, unknown outcomes, a restore, fenced writes, final reads.
func validRun() history.History {
	return history.History{
		Ops: []history.Op{
			acquireOK(0, "a", "h1", 5, 0, 10),
			acquireHeld(1, "a", "h2", "h1", 5, 5, 15),
			put(0, "k", "v1", 5, history.OK, 20, 30),
			renew(0, "a", 5, history.OK, 20, 30),
			acquireOK(1, "a", "h2", 8, 40, 50), // h1's lease expired unseen
			withCode(put(0, "k", "v2", 5, history.StaleToken, 60, 70), "stale_token"),
			withCode(renew(0, "a", 5, history.LeaseLost, 60, 70), "lease_lost"),
			refused(2, "k", "", 0, "missing_token", 62, 68),
			put(1, "k", "v3", 8, history.Unknown, 60, 70),
			acquireUnknown(2, "b", "h3", 80, 90),
			{Kind: history.SemAcquire, Target: "s", Client: 1, Holder: "h2", Limit: 2, TTL: 1000, Token: 9, Outcome: history.OK, Call: 95, Return: 100},
			{Kind: history.SemRelease, Target: "s", Client: 1, Token: 9, Outcome: history.OK, Call: 102, Return: 104},
			campaignOK(0, "e", "h1", "h1.v1", 10, 105, 110),
			readHeld(2, "b", 1<<32|2, 200, 210),
			acquireOK(0, "c", "h1", 1<<32|4, 220, 230),
			put(0, "j", "w1", 1<<32|4, history.OK, 240, 250),
			get(1, "j", "w1", 1<<32|4, 260, 270),
			// A forged token, above every grant: truly never issued.
			refused(2, "j", "w2", 1<<32|9, "unissued_token", 280, 290),
			// A session holding lock d, closed.
			sessionCreated(3, 1<<32|5, 1000, 300, 305),
			acquireUnder(3, "d", 1<<32|5, 1<<32|6, 310, 315),
			boundPut(3, "d", 1<<32|6, history.OK, 320, 325),
			closed(3, 1<<32|5, 330, 335, 1<<32|6),
			// A multi-lock of multi.x and multi.y, one bound write, released.
			{Kind: history.MultiAcquire, Target: "multi.x,multi.y", Names: []string{"multi.x", "multi.y"}, Client: 1, Holder: "h2", TTL: 1000,
				Token: 1<<32 | 10, Outcome: history.OK, Call: 340, Return: 345},
			boundPut(1, "multi.y", 1<<32|10, history.OK, 350, 355),
			{Kind: history.MultiRelease, Target: "multi.x,multi.y", Names: []string{"multi.x", "multi.y"}, Client: 1, Token: 1<<32 | 10,
				Outcome: history.OK, Call: 360, Return: 365},
			// Lock f's grant revoked by an operator: the holder's
			// lock-bound write and renewal after it are refused.
			acquireOK(4, "f", "h4", 1<<32|20, 370, 375),
			{Kind: history.Revoke, Target: "f", Token: 1<<32 | 20, Client: 2, Outcome: history.OK, Call: 380, Return: 385},
			withCode(boundPut(4, "f", 1<<32|20, history.NotLockHolder, 390, 395), "not_lock_holder"),
			withCode(renew(4, "f", 1<<32|20, history.Revoked, 396, 398), "revoked"),
			// Two shared grants of an rw lock, then an exclusive one.
			rwOK(4, "ra", "shared", 1<<32|30, time.Second, 400, 405),
			rwOK(5, "ra", "shared", 1<<32|31, time.Second, 400, 406),
			rwRelease(4, "ra", 1<<32|30, 410, 411),
			rwRelease(5, "ra", 1<<32|31, 410, 412),
			rwOK(4, "ra", "exclusive", 1<<32|32, time.Second, 413, 415),
			// Two durable waiters of lock da, granted in enqueue order.
			durableOK(5, "da", 1<<32|40, 1<<32|33, 416, 418),
			rwRelease(5, "da", 1<<32|40, 419, 420),
			durableOK(6, "da", 1<<32|41, 1<<32|34, 417, 421),
		},
		Events: []history.Event{
			{Kind: "partition", Time: 55, Description: "isolate n1"},
			{Kind: history.EventRestore, Time: 150, Description: "restore n1..n3 from snapshot 3"},
		},
		FinalReads: []history.FinalRead{
			{Key: "k", Found: true, Value: "v3", Token: 8},
			{Key: "j", Found: true, Value: "w1", Token: 1<<32 | 4},
			{Key: "kv.d", Found: true, Value: "v", Token: 1<<32 | 6},
			{Key: "kv.multi.y", Found: true, Value: "v", Token: 1<<32 | 10},
		},
		Accepted: map[string][]history.Stamp{
			"k": {{Token: 5}, {Token: 8}},
			"j": {{Token: 1<<32 | 4}},
		},
		MemberHashes: map[string]string{"n1": "c0ffee", "n2": "c0ffee", "n3": "c0ffee"},
		Observations: []history.Observation{seen(3, 0, "e", "h1", 10, "h1.v1", 107)},
		// The restore's entries were not seen: a gap up to the new epoch.
		Watch: &history.Watch{
			Grants: []history.WatchedGrant{watched("acquired", "a", 5), watched("acquired", "a", 8), watched("acquired", "e", 10), watched("acquired", "c", 1<<32|4),
				{Index: 1<<32 | 6, Type: "acquired", Lock: "d", Token: 1<<32 | 6, Session: 1<<32 | 5},
				{Index: 1<<32 | 10, Type: "acquired", Lock: "multi.x", Token: 1<<32 | 10},
				{Index: 1<<32 | 10, Type: "acquired", Lock: "multi.y", Token: 1<<32 | 10}},
			Events: []history.WatchedEvent{
				sessionEv(1<<32|5, "session_created", 1<<32|5),
				{Index: 1<<32 | 7, Type: "put", Key: "kv.d", Token: 1<<32 | 6},
				ev(1<<32|8, "released", "d", 1<<32|6),
				sessionEv(1<<32|8, "session_closed", 1<<32|5),
				{Index: 1<<32 | 11, Type: "put", Key: "kv.multi.y", Token: 1<<32 | 10},
				ev(1<<32|12, "released", "multi.x", 1<<32|10),
				ev(1<<32|12, "released", "multi.y", 1<<32|10),
			},
			Gaps:  []history.WatchGap{{After: 10, Until: 1 << 32}},
			Until: 1<<32 | 12,
		},
	}
}

func TestCheckPassesAValidRun(t *testing.T) {
	r := Check(validRun(), Options{})
	if !r.OK() {
		t.Fatalf("valid run rejected:\n%s", r)
	}
	for _, v := range r.Verdicts {
		if v.Status != Pass { // the epoch, fence and hash checks must have run
			t.Errorf("%s: %s, want every check to run and pass", v.Name, v.Status)
		}
	}
	if !strings.Contains(r.String(), "all 22 checks passed") {
		t.Errorf("summary:\n%s", r)
	}
}

func TestCheckRejectsAMalformedHistory(t *testing.T) {
	for name, op := range map[string]history.Op{
		"unknown kind":           {Kind: "lock", Target: "a", Outcome: history.OK},
		"outcome the kind lacks": {Kind: history.Read, Target: "a", Outcome: history.StaleToken},
		"misspelt outcome":       {Kind: history.Acquire, Target: "a", Outcome: "OK"},
		"no target":              {Kind: history.Get, Outcome: history.OK},
		"returns before call":    {Kind: history.Get, Target: "k", Outcome: history.OK, Call: 10, Return: 5},
		"refused without a code": {Kind: history.Put, Target: "k", Token: 5, Outcome: history.Refused},
		"refusals are puts'":     {Kind: history.Acquire, Target: "a", Outcome: history.Refused, Code: "upgrade_required"},
		"ok with an error code":  {Kind: history.Put, Target: "k", Token: 5, Outcome: history.OK, Code: "stale_token"},
		// A refusal with an outcome of its own must be recorded as that
		// outcome, not as one the model reads nothing into.
		"stale_token as refused":  {Kind: history.Put, Target: "k", Token: 5, Outcome: history.Refused, Code: "stale_token"},
		"stale_token, wrong code": {Kind: history.Put, Target: "k", Token: 5, Outcome: history.StaleToken, Code: "unissued_token"},
	} {
		t.Run(name, func(t *testing.T) {
			h := validRun()
			h.Ops = append(h.Ops, op)
			r := Check(h, Options{})
			if r.OK() || len(r.Verdicts) != 1 || r.Verdicts[0].Name != CheckHistory {
				t.Fatalf("malformed history not refused:\n%s", r)
			}
		})
	}
}

func withCode(op history.Op, code string) history.Op {
	op.Code = code
	return op
}

func TestReportSummarizesFailures(t *testing.T) {
	h := validRun()
	h.Ops = append(h.Ops, renew(0, "a", 5, history.OK, 300, 310)) // the old holder told it still holds
	h.MemberHashes["n3"] = "deadbeef"
	r := Check(h, Options{})
	if r.OK() {
		t.Fatal("report OK despite violations")
	}
	s := r.String()
	for _, want := range []string{
		"2 of 22 checks not OK",
		"FAIL          lock linearizability",
		"renew(a, t5) -> ok [300, 310]",
		"FAIL          member state hashes",
		"deadbeef: n3",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}

func TestWriteArtifacts(t *testing.T) {
	h := validRun()
	h.Ops = append(h.Ops, renew(0, "a", 5, history.OK, 300, 310), get(2, "k", "v2", 5, 300, 310))
	dir := filepath.Join(t.TempDir(), "run")
	paths, err := Check(h, Options{}).WriteArtifacts(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
		info, err := os.Stat(p)
		if err != nil || info.Size() == 0 {
			t.Errorf("%s: missing or empty (%v)", p, err)
		}
	}
	want := []string{"history.json", "report.txt", "lock-linearizability.html", "fenced-key-linearizability.html"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("wrote %v, want %v", names, want)
	}
	back, err := history.ReadHistory(filepath.Join(dir, "history.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, h) {
		t.Errorf("history.json does not round-trip:\n got %+v\nwant %+v", back, h)
	}
}

func TestWriteArtifactsSkipsPassingModels(t *testing.T) {
	paths, err := Check(validRun(), Options{}).WriteArtifacts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if strings.HasSuffix(p, ".html") {
			t.Errorf("visualized a passing model: %s", p)
		}
	}
}

func TestFinalReadsSurviveJSONWhenEmpty(t *testing.T) {
	h := history.History{Ops: []history.Op{put(0, "k", "a", 5, history.OK, 0, 10)}, FinalReads: []history.FinalRead{}}
	path := filepath.Join(t.TempDir(), "h.json")
	if err := h.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	back, err := history.ReadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	// Taken but empty is a lost write, not a skipped check.
	wantStatus(t, back, CheckNoLostWrite, Fail)
}

func TestOptionsTimeout(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		0:           DefaultTimeout,
		-1:          0,
		time.Second: time.Second,
	} {
		if got := (Options{Timeout: in}).timeout(); got != want {
			t.Errorf("Timeout %v: porcupine gets %v, want %v", in, got, want)
		}
	}
}
