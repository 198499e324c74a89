package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
	"github.com/fencer-io/fencer/fsm/secrets"
)

func secretFor(name string, seed byte) string {
	var r [secrets.RandomLen]byte
	for i := range r {
		r[i] = seed + byte(i)
	}
	return secrets.New(name, r)
}

// A refused release says what the state can prove: a secret of another lock,
// a token above the lock's grant, a wrong secret for the current grant, or a
// grant of this lock that ended.
func TestReleaseRefusalsSayWhy(t *testing.T) {
	f := New(nil)
	sa, sb, sa2 := secretFor("a", 1), secretFor("b", 2), secretFor("a", 3)
	ga := mustGrant(t, f, acquire("a", "w1", sa), 3)
	gb := mustGrant(t, f, acquire("b", "w2", sb), 4)
	if _, ok := f.ApplyCommand(&entry.Release{Lock: "a", Token: ga.Token, Lease: sa}, 5).(*ReleaseResult); !ok {
		t.Fatal("release of a")
	}
	ga2 := mustGrant(t, f, acquire("a", "w1", sa2), 6)

	for _, c := range []struct {
		rel  *entry.Release
		why  refusal.LeaseRefusal
		text string
	}{
		{&entry.Release{Lock: "a", Token: gb.Token, Lease: sb}, refusal.LeaseOtherLock, `lease does not belong to lock "a": its secret was issued for another lock`},
		{&entry.Release{Lock: "b", Token: ga2.Token, Lease: sa2}, refusal.LeaseOtherLock, `lease does not belong to lock "b"`},
		{&entry.Release{Lock: "a", Token: ga2.Token, Lease: sa}, refusal.LeaseWrongSecret, `the secret is not that of lock "a"'s grant with token 6`},
		{&entry.Release{Lock: "b", Token: 9, Lease: sb}, refusal.LeaseNeverGranted, `token 9 was never a grant of lock "b": its current grant is token 4`},
		{&entry.Release{Lock: "a", Token: ga.Token, Lease: sa}, refusal.LeaseEnded, `lock "a"'s grant with token 3 is no longer current (its lease expired, or it was released or superseded); its current grant is token 6`},
		{&entry.Release{Lock: "c", Token: 2, Lease: secretFor("c", 9)}, refusal.LeaseEnded, `lock "c"'s grant with token 2 is no longer current (its lease expired, or it was released or superseded); the lock is free`},
		{&entry.Release{Lock: "c", Token: 2, Lease: "0123456789abcdef0123456789abcdef"}, refusal.LeaseUnknown, `lock "c" has no current grant with token 2 and this secret`},
	} {
		err, _ := f.ApplyCommand(c.rel, 7).(error)
		var le *refusal.LeaseError
		if !errors.As(err, &le) || !errors.Is(err, refusal.ErrLeaseLost) || le.Why != c.why || !strings.HasPrefix(err.Error(), c.text) {
			t.Errorf("release %+v: %v, want %q", c.rel, err, c.text)
		}
	}
	if held, _ := f.Lock("b"); held.Token != gb.Token {
		t.Fatal("a refused release changed the state")
	}
}
