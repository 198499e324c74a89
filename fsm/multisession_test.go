package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/event"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// sessionMulti is a multi-acquire under session id (secret "sess-secret",
// as openSession's), with no TTL of its own.
func sessionMulti(id uint64, holder, secret string, names ...string) *entry.MultiAcquire {
	c := multiAcquire(holder, secret, names...)
	c.TTLMillis, c.Session, c.SessionLease = 0, id, "sess-secret"
	return c
}

// A multi-grant under a session lives as long as the session: every name
// has the session's TTL and lock-delay and one token, the session lists
// each name with it, a snapshot keeps it, one name cannot be released
// alone, and the session's expiry ends every name in its one entry (each
// name's lock-delay starting there) and forgets the multi-grant.
// Fails with endSession reading sess.Grants() instead of sessionGrants:
// the expiry ends one name and leaves the other held by an ended session.
func TestMultiGrantUnderASession(t *testing.T) {
	l := newEntryLog(t)
	l.index = 1
	sess := openSession(t, l.f, l.index, 300)
	if _, ok := l.apply(acquire("z", "svc", "l-z")).(*AcquireResult); !ok {
		t.Fatal("plain acquire refused")
	}
	wrong := sessionMulti(sess.ID, "svc", "m", "a", "b")
	wrong.SessionLease = "guess"
	if err, _ := l.apply(wrong).(error); !errors.Is(err, refusal.ErrSessionMismatch) {
		t.Fatalf("multi-acquire with the wrong session lease: %v", err)
	}
	r, ok := l.apply(sessionMulti(sess.ID, "svc", "m", "a", "b")).(*MultiResult)
	if !ok {
		t.Fatalf("multi-acquire under the session refused")
	}
	g := r.Grant
	if g.Token != l.index || g.Session != sess.ID || g.TTLMillis != sess.TTLMillis || len(g.Names) != 2 {
		t.Fatalf("multi-grant under the session: %+v", g)
	}
	for _, n := range g.Names {
		if lk, held := l.f.Lock(n); !held || lk.Token != g.Token || lk.Session != sess.ID || lk.LockDelayMillis != 300 {
			t.Fatalf("%s: %+v %v; want held under the session with its lock-delay", n, lk, held)
		}
	}
	st, _ := l.f.Session(sess.ID)
	if len(st.Grants) != 2 || st.Grants[0].Name != "a" || st.Grants[1].Name != "b" || st.Grants[0].Token != g.Token || st.Grants[1].Token != g.Token {
		t.Fatalf("the session's grants: %+v; want a and b with token %d", st.Grants, g.Token)
	}
	if err, _ := l.apply(&entry.Release{Lock: "a", Token: g.Token, Lease: "m"}).(error); !errors.Is(err, refusal.ErrMultiGrant) {
		t.Fatalf("release of one name: %v", err)
	}
	roundTrip(t, l.f)

	rec := &recorder{}
	l.f.Observe(rec)
	res, ok := l.apply(&entry.SessionEnd{Session: sess.ID, Expired: true}).(*SessionEndResult)
	if !ok || len(res.Locks) != 2 {
		t.Fatalf("session expiry: %+v; want both names ended", res)
	}
	for _, n := range g.Names {
		if _, held := l.f.Lock(n); held {
			t.Fatalf("%s held after its session's end", n)
		}
	}
	if l.f.IsMulti(g.Token) {
		t.Fatal("the multi-grant outlived its session")
	}
	if d := l.f.Delays(); len(d) != 2 || d[0].Since != l.index || d[1].Since != l.index {
		t.Fatalf("lock-delays after the expiry: %+v; want one per name from the end's entry", d)
	}
	expired := 0
	for _, e := range rec.events {
		if e.Type == event.Expired && e.Token == g.Token {
			expired++
		}
	}
	if expired != 2 {
		t.Fatalf("events of the end: %+v; want each name's expiry", rec.events)
	}
	again := sessionMulti(sess.ID, "svc", "m2", "c")
	again.RequestID = "r-again"
	if err, _ := l.apply(again).(error); !errors.Is(err, refusal.ErrSessionExpired) {
		t.Fatalf("multi-acquire under the ended session: %v", err)
	}
	roundTrip(t, l.f)
}

// A multi-grant under a session and a multi-grant's revoke are written
// only for members of LogFormatMultiSessions: an older build would drop
// the session (and apply a grant with no TTL) or the revoke (and refuse
// it as a release without the lease). Fails with fieldsFormat's clause
// removed: both encode for format 11.
func TestMultiSessionNeedsItsFormat(t *testing.T) {
	for _, c := range []entry.Command{sessionMulti(1, "svc", "m", "a"), &entry.MultiRelease{Token: 2, Revoked: true}} {
		if _, err := entry.EncodeFormat(c, entry.LogFormatMultiModes); err == nil {
			t.Errorf("%T %+v encoded for format %d", c, c, entry.LogFormatMultiModes)
		}
		if _, err := entry.EncodeFormat(c, entry.LogFormatMultiSessions); err != nil {
			t.Errorf("%T for format %d: %v", c, entry.LogFormatMultiSessions, err)
		}
	}
}

// A revoke of a multi-grant ends every name in one entry, as its expiry
// would (the session's lock-delay starting on each), and is remembered:
// the token is revoked, and the events say so.
// Fails with applyMultiRelease leaving s.revoked alone: the token is not
// known as revoked.
func TestRevokeOfAWholeMultiGrant(t *testing.T) {
	l := newEntryLog(t)
	l.index = 1
	sess := openSession(t, l.f, l.index, 200)
	under := l.apply(sessionMulti(sess.ID, "svc", "m", "a", "b")).(*MultiResult).Grant
	plain := l.apply(multiAcquire("w", "s", "c", "d")).(*MultiResult).Grant
	rec := &recorder{}
	l.f.Observe(rec)
	for _, g := range []MultiGrant{under, plain} {
		res, ok := l.apply(&entry.MultiRelease{Token: g.Token, Revoked: true}).(*MultiReleaseResult)
		if !ok || !res.Revoked || len(res.Locks) != 2 {
			t.Fatalf("revoke of multi-grant %d: %+v", g.Token, res)
		}
		if !l.f.Revoked(g.Token) || l.f.IsMulti(g.Token) {
			t.Fatalf("multi-grant %d after its revoke: revoked %v, live %v", g.Token, l.f.Revoked(g.Token), l.f.IsMulti(g.Token))
		}
	}
	if d := l.f.Delays(); len(d) != 2 || d[0].Lock != "a" || d[1].Lock != "b" {
		t.Fatalf("lock-delays: %+v; want the session's on a and b only", d)
	}
	if st, _ := l.f.Session(sess.ID); len(st.Grants) != 0 {
		t.Fatalf("the session still lists %+v", st.Grants)
	}
	revoked := 0
	for _, e := range rec.events {
		if e.Type == event.Revoked {
			revoked++
		}
	}
	if revoked != 4 {
		t.Fatalf("events: %+v; want four revoked", rec.events)
	}
	if err, _ := l.apply(&entry.MultiRelease{Token: plain.Token, Revoked: true}).(error); !errors.Is(err, refusal.ErrLeaseLost) {
		t.Fatalf("second revoke: %v", err)
	}
	roundTrip(t, l.f)
}

// A leader of an older build may revoke one name of a multi-grant (an
// entry this build's leader never writes): the FSM ends that name alone,
// as the older build does, and every read, a snapshot and its restore
// then see the multi-grant as its names still held; once none is, it is
// gone. Fails with restoreMultis requiring every name held: the older
// build's snapshot taken after the first revoke (which still names the
// revoked name) does not restore.
func TestOneNameRevokedByAnOlderLeaderStillRestores(t *testing.T) {
	l := newEntryLog(t)
	g := l.apply(multiAcquire("w", "s", "a", "b", "c")).(*MultiResult).Grant
	if _, ok := l.apply(&entry.Revoke{Lock: "a", Token: g.Token}).(*RevokeResult); !ok {
		t.Fatal("one-name revoke refused")
	}
	m, ok := l.f.MultiGrant(g.Token)
	if !ok || len(m.Names) != 2 || m.Names[0] != "b" || m.Lease != "s" {
		t.Fatalf("multi-grant after one name's revoke: %+v %v; want b and c with its lease", m, ok)
	}
	roundTrip(t, l.f)
	// An older build's snapshot still names "a".
	var buf bytes.Buffer
	if _, err := l.f.Image().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	older := bytes.Replace(buf.Bytes(), []byte(`"names":["b","c"]`), []byte(`"names":["a","b","c"]`), 1)
	if bytes.Equal(older, buf.Bytes()) {
		t.Fatalf("no multi-lock record of b and c in\n%s", buf.Bytes())
	}
	g2 := New(nil)
	if err := g2.Restore(io.NopCloser(bytes.NewReader(older))); err != nil {
		t.Fatalf("an older build's snapshot of the state does not restore: %v", err)
	}
	if g2.Digest() != l.f.Digest() {
		t.Fatal("restored from an older build's snapshot, the state differs")
	}
	for _, n := range []string{"b", "c"} {
		if _, ok := l.apply(&entry.Revoke{Lock: n, Token: g.Token}).(*RevokeResult); !ok {
			t.Fatalf("revoke of %s refused", n)
		}
	}
	if l.f.IsMulti(g.Token) || len(l.f.MultiGrants()) != 0 {
		t.Fatalf("multi-grant with no name held still live: %+v", l.f.MultiGrants())
	}
	roundTrip(t, l.f)
}
