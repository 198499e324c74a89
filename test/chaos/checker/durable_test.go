package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// durableOK is a durable rw_acquire's grant of token, enqueued at index.
func durableOK(c int, lock string, token, index uint64, call, ret int64) history.Op {
	op := rwOK(c, lock, "exclusive", token, time.Second, call, ret)
	op.Durable, op.WaitIndex = true, index
	return op
}

// Durable waiters granted in their enqueue order, a grant across an epoch,
// and durable acquires granted without queueing (no wait index) between
// them: nothing to report.
func TestDurableOrderPassesEnqueueOrder(t *testing.T) {
	h := history.History{Ops: []history.Op{
		durableOK(0, "da", 10, 4, 0, 11*ms),
		durableOK(1, "da", 12, 5, 1*ms, 13*ms),
		rwOK(2, "da", "exclusive", 14, time.Second, 14*ms, 15*ms),
		durableOK(3, "da", 1<<40|20, 6, 2*ms, 30*ms), // served by a leader after a restore
		durableOK(0, "db", 11, 8, 0, 12*ms),          // another lock's order is its own
	}}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	if vs := DurableOrder(h); len(vs) != 0 {
		t.Fatalf("violations on an allowed history: %+v", vs)
	}
	if v, _ := Check(h, Options{}).Verdict(CheckDurableOrder); v.Status != Pass {
		t.Fatalf("verdict %+v", v)
	}
}

// A durable waiter enqueued later granted before one enqueued earlier,
// and a grant that claims an Enqueue after itself, are reported.
func TestDurableOrderFailsOnAReordering(t *testing.T) {
	h := history.History{Ops: []history.Op{
		durableOK(0, "da", 10, 5, 0, 11*ms),
		durableOK(1, "da", 12, 4, 1*ms, 13*ms), // enqueued first, granted second
		durableOK(2, "db", 14, 14, 0, 15*ms),
	}}
	vs := DurableOrder(h)
	if len(vs) != 2 || !strings.Contains(vs[0].Message, "lock da: durable waiter enqueued at 5 granted t10, before the one enqueued at 4 (t12)") ||
		!strings.Contains(vs[1].Message, "lock db: grant t14 says it was enqueued at 14") {
		t.Fatalf("violations %+v", vs)
	}
	if r := Check(h, Options{}); r.OK() {
		t.Fatal("a history with a reordering passed")
	}
}
