package fsm

import (
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
)

// NameState answers in one read what the grant engine asks of a name: its
// holders and limit, its lock-delays, whether the request was granted, and
// the grants held in all and by the holder, for a lock and a semaphore
// alike, each kind in its own namespace.
func TestNameStateAnswersTheEnginesQuestion(t *testing.T) {
	f := New(nil)
	a := acquire("x", "h", "s1")
	a.RequestID, a.LockDelayMillis = "r1", 500
	for i, cmd := range []entry.Command{
		a,
		&entry.SemAcquire{Semaphore: "x", Holder: "h", Lease: "s2", TTLMillis: 1000, Limit: 3, RequestID: "r2", LockDelayMillis: 700},
		&entry.SemAcquire{Semaphore: "x", Holder: "k", Lease: "s3", TTLMillis: 1000, Limit: 3},
	} {
		if err, _ := f.ApplyCommand(cmd, uint64(i+1)).(error); err != nil {
			t.Fatal(err)
		}
	}
	lock := f.NameState(KindLock, "x", "h", "r1", "")
	if len(lock.Holders) != 1 || lock.Holders[0].Token != 1 || lock.Holders[0].Secret != "s1" || lock.Holders[0].LockDelayMillis != 500 ||
		lock.Limit != 1 || !lock.Granted || lock.Total != 3 || lock.Mine != 2 || lock.Lock.Holder != "h" || len(lock.Delays) != 0 {
		t.Fatalf("lock x: %+v", lock)
	}
	if st := f.NameState(KindLock, "x", "h", "r2", ""); st.Granted {
		t.Fatal("the semaphore's request id is taken for the lock's")
	}
	sem := f.NameState(KindSemaphore, "x", "k", "r2", "")
	if len(sem.Holders) != 2 || sem.Limit != 3 || sem.Granted || sem.Mine != 1 || sem.InUse() != 2 {
		t.Fatalf("semaphore x: %+v", sem)
	}
	if g, ok := sem.Grant(2); !ok || g.Holder != "h" || g.LockDelayMillis != 700 {
		t.Fatalf("permit 2: %+v %v", g, ok)
	}
	if st := f.NameState(KindSemaphore, "x", "h", "r2", ""); !st.Granted {
		t.Fatal("the permit's request id is not found")
	}
	// Expiries start the lock's delay and a slot's: both are read, and the
	// slot counts against the limit.
	for i, cmd := range []entry.Command{&entry.Expire{Lock: "x", Token: 1}, &entry.SemExpire{Semaphore: "x", Token: 2}} {
		if err, _ := f.ApplyCommand(cmd, uint64(4+i)).(error); err != nil {
			t.Fatal(err)
		}
	}
	lock = f.NameState(KindLock, "x", "h", "", "")
	if len(lock.Holders) != 0 || len(lock.Delays) != 1 || lock.Delays[0].Since != 4 || lock.Granted || lock.Total != 1 {
		t.Fatalf("lock x after its expiry: %+v", lock)
	}
	sem = f.NameState(KindSemaphore, "x", "", "", "")
	if len(sem.Holders) != 1 || len(sem.Delays) != 1 || sem.InUse() != 2 {
		t.Fatalf("semaphore x after an expiry: %+v", sem)
	}
}
