package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/test/chaos/history"
)

func rwOK(c int, lock, mode string, token uint64, ttl time.Duration, call, ret int64) history.Op {
	return history.Op{Kind: history.RWAcquire, Target: lock, Client: c, Holder: "h", Mode: mode, TTL: ttl.Milliseconds(),
		Token: token, Outcome: history.OK, Call: call, Return: ret}
}

func rwRelease(c int, lock string, token uint64, call, ret int64) history.Op {
	return history.Op{Kind: history.RWRelease, Target: lock, Client: c, Token: token, Outcome: history.OK, Call: call, Return: ret}
}

// Shared grants side by side, an exclusive one after both released, and an
// exclusive one whose lease had certainly ended before the next grant, on
// well-formed histories: nothing to report.
func TestRWExclusionPassesWhatTheServiceAllows(t *testing.T) {
	h := history.History{Ops: []history.Op{
		rwOK(0, "ra", "shared", 2, time.Second, 0, 1*ms),
		rwOK(1, "ra", "shared", 3, time.Second, 0, 2*ms),
		rwRelease(0, "ra", 2, 10*ms, 11*ms),
		rwRelease(1, "ra", 3, 12*ms, 13*ms),
		rwOK(2, "ra", "exclusive", 4, time.Second, 5*ms, 14*ms), // queued, granted after both
		rwOK(3, "rb", "exclusive", 5, 100*time.Millisecond, 0, 1*ms),
		rwOK(4, "rb", "shared", 6, time.Second, 50*ms, 150*ms), // after t5's lease surely ended
	}}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	if vs := RWExclusion(h); len(vs) != 0 {
		t.Fatalf("violations on an allowed history: %+v", vs)
	}
	r := Check(h, Options{})
	if v, _ := r.Verdict(CheckRWExclusion); v.Status != Pass {
		t.Fatalf("verdict %+v", v)
	}
}

// An exclusive grant certainly live beside a shared one, and two exclusive
// grants at once, are reported, each pair once.
func TestRWExclusionFailsOnAnOverlap(t *testing.T) {
	h := history.History{Ops: []history.Op{
		rwOK(0, "ra", "shared", 2, time.Second, 0, 1*ms),
		rwOK(1, "ra", "exclusive", 3, time.Second, 2*ms, 3*ms),
		rwOK(2, "rb", "exclusive", 4, time.Second, 0, 1*ms),
		rwOK(3, "rb", "exclusive", 5, time.Second, 0, 2*ms),
	}}
	vs := RWExclusion(h)
	if len(vs) != 2 || !strings.Contains(vs[0].Message, "exclusive grant t3 certainly live beside shared grant t2") ||
		!strings.Contains(vs[1].Message, "lock rb: exclusive grant t4 certainly live beside exclusive grant t5") {
		t.Fatalf("violations %+v", vs)
	}
	if r := Check(h, Options{}); r.OK() {
		t.Fatal("a history with an overlap passed")
	}
}
