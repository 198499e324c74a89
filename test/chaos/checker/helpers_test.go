package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// Constructors for test histories. Times are small integers; what matters is
// which intervals overlap.

func acquireOK(c int, lock, holder string, token uint64, call, ret int64) history.Op {
	return history.Op{Kind: history.Acquire, Target: lock, Client: c, Holder: holder, Token: token, Outcome: history.OK, Call: call, Return: ret}
}

func acquireHeld(c int, lock, holder, heldBy string, token uint64, call, ret int64) history.Op {
	return history.Op{Kind: history.Acquire, Target: lock, Client: c, Holder: holder, HeldBy: heldBy, Token: token, Outcome: history.LockHeld, Call: call, Return: ret}
}

func acquireUnknown(c int, lock, holder string, call, ret int64) history.Op {
	return history.Op{Kind: history.Acquire, Target: lock, Client: c, Holder: holder, Outcome: history.Unknown, Error: "timeout", Call: call, Return: ret}
}

func renew(c int, lock string, token uint64, out history.Outcome, call, ret int64) history.Op {
	return history.Op{Kind: history.Renew, Target: lock, Client: c, Token: token, Outcome: out, Call: call, Return: ret}
}

func release(c int, lock string, token uint64, out history.Outcome, call, ret int64) history.Op {
	return history.Op{Kind: history.Release, Target: lock, Client: c, Token: token, Outcome: out, Call: call, Return: ret}
}

func readHeld(c int, lock string, token uint64, call, ret int64) history.Op {
	return history.Op{Kind: history.Read, Target: lock, Client: c, Held: true, Token: token, Outcome: history.OK, Call: call, Return: ret}
}

func readFree(c int, lock string, call, ret int64) history.Op {
	return history.Op{Kind: history.Read, Target: lock, Client: c, Outcome: history.OK, Call: call, Return: ret}
}

func put(c int, key, value string, token uint64, out history.Outcome, call, ret int64) history.Op {
	return history.Op{Kind: history.Put, Target: key, Client: c, Value: value, Token: token, Outcome: out, Call: call, Return: ret}
}

// refused is a put refused with code (not stale_token nor not_lock_holder,
// which have outcomes of their own).
func refused(c int, key, value string, token uint64, code string, call, ret int64) history.Op {
	op := put(c, key, value, token, history.Refused, call, ret)
	op.Code = code
	return op
}

func putSeq(c int, key, value string, token, seq uint64, out history.Outcome, call, ret int64) history.Op {
	op := put(c, key, value, token, out, call, ret)
	op.Seq = seq
	return op
}

func get(c int, key, value string, token uint64, call, ret int64) history.Op {
	return history.Op{Kind: history.Get, Target: key, Client: c, Found: true, Value: value, Token: token, Outcome: history.OK, Call: call, Return: ret}
}

func getMissing(c int, key string, call, ret int64) history.Op {
	return history.Op{Kind: history.Get, Target: key, Client: c, Outcome: history.OK, Call: call, Return: ret}
}

// check runs Check with a short search budget and returns the named verdict.
func check(t *testing.T, h history.History, name string) Verdict {
	t.Helper()
	r := Check(h, Options{Timeout: 10 * time.Second})
	v, ok := r.Verdict(name)
	if !ok {
		t.Fatalf("no verdict %q in report:\n%s", name, r)
	}
	return v
}

func wantStatus(t *testing.T, h history.History, name string, want Status) Verdict {
	t.Helper()
	v := check(t, h, name)
	if v.Status != want {
		t.Fatalf("%s: got %s, want %s\n%s", name, v.Status, want, Check(h, Options{}))
	}
	return v
}

// wantEvidence checks that some violation of v lists an op whose rendering
// contains each of the fragments.
func wantEvidence(t *testing.T, v Verdict, fragments ...string) {
	t.Helper()
	for _, vi := range v.Violations {
		for _, op := range vi.Ops {
			s := op.String()
			all := true
			for _, f := range fragments {
				all = all && strings.Contains(s, f)
			}
			if all {
				return
			}
		}
	}
	t.Errorf("%s: no evidence op containing %q in %+v", v.Name, fragments, v.Violations)
}
