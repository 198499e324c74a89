package test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/internal/acl"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

const revokeACL = `{"tokens":[
 {"name":"app","secret":"client-secret-0123456789","role":"client","locks":["jobs."],"keys":["jobs."]},
 {"name":"ops","secret":"operator-secret-012345678","role":"operator","locks":["jobs."],"keys":["*"]},
 {"name":"other-ops","secret":"operator-other-012345678","role":"operator","locks":["billing."],"keys":["*"]}
]}`

// Issue 28 item 3, end to end on three real nodes with an ACL and the Go
// client: a client may not revoke, nor an operator outside its prefixes;
// an operator's revoke hands the lock to the waiter in the revoking entry
// (its token greater), the holder's keep-alive lease ends at its next
// renewal with ErrRevoked (and ErrLeaseLost), well before its deadline,
// its lock-bound write is refused, and the history says revoked. A
// session's revoke ends the session and the lease under it alike, and a
// permit's frees its slot.
func TestRevokeEndToEnd(t *testing.T) {
	c := tc.New(t, 3, tc.Options{Configure: withClusterSecret, Server: aclServer(t, revokeACL, acl.WithClusterSecret(testClusterSecret))})
	c.WaitReady(20 * time.Second)
	newClient := func(secret string) *client.Client {
		cl, err := client.New(endpoints(c), client.WithTimeout(5*time.Second), client.WithBearerToken(secret))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	app, ops, otherOps := newClient("client-secret-0123456789"), newClient("operator-secret-012345678"), newClient("operator-other-012345678")
	ctx := context.Background()

	const ttl = 6 * time.Second
	held, err := app.Acquire(ctx, "jobs.r", client.TTL(ttl), client.Holder("victim"))
	if err != nil {
		t.Fatal(err)
	}
	if err := app.PutFenced(ctx, "jobs.out", []byte("before"), held.Token(), client.WithLock("jobs.r")); err != nil {
		t.Fatal(err)
	}
	waited := make(chan *client.Lease, 1)
	go func() {
		l, err := app.Acquire(ctx, "jobs.r", client.TTL(ttl), client.Holder("next"), client.Wait(30*time.Second))
		if err != nil {
			t.Error(err)
		}
		waited <- l
	}()
	tc.Poll(t, 10*time.Second, "the waiter queued", func() bool {
		st, err := app.Lock(ctx, "jobs.r")
		return err == nil && st.Waiters == 1
	})

	if _, err := app.RevokeLock(ctx, "jobs.r", held.Token()); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("a client's revoke: %v, want forbidden", err)
	}
	if _, err := otherOps.RevokeLock(ctx, "jobs.r", held.Token()); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("an operator's revoke outside its prefixes: %v, want forbidden", err)
	}
	revokedAt := time.Now()
	res, err := ops.RevokeLock(ctx, "jobs.r", held.Token())
	if err != nil {
		t.Fatal(err)
	}
	next := <-waited
	if next == nil || res.Token != held.Token() || res.Holder != "victim" || res.NextToken != next.Token() || next.Token() <= held.Token() {
		t.Fatalf("revoke %+v, the waiter's grant %v: want it granted in the revoking entry", res, next)
	}
	select {
	case <-held.Done():
	case <-time.After(ttl):
		t.Fatal("the revoked lease still held after its TTL")
	}
	if lost := time.Since(revokedAt); lost > ttl/2 {
		t.Errorf("the revoked lease ended %v after the revoke: want at its next renewal (ttl/3)", lost)
	}
	if err := held.Err(); !errors.Is(err, client.ErrRevoked) || !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("the revoked lease's error: %v, want revoked (and lease lost)", err)
	}
	if err := app.PutFenced(ctx, "jobs.out", []byte("late"), held.Token(), client.WithLock("jobs.r")); !errors.Is(err, client.ErrNotLockHolder) && !errors.Is(err, client.ErrStaleToken) {
		t.Fatalf("the revoked holder's write: %v, want refused", err)
	}
	if g, err := app.Token(ctx, held.Token()); err != nil || g.Ended != wire.GrantRevoked {
		t.Fatalf("history of the revoked grant: %+v %v", g, err)
	}
	if _, err := ops.RevokeLock(ctx, "jobs.r", held.Token()); !errors.Is(err, client.ErrRevoked) {
		t.Fatalf("a second revoke: %v, want revoked", err)
	}
	next.Release(ctx)

	// A session and the lease under it.
	sess, err := app.NewSession(ctx, client.SessionTTL(ttl), client.SessionHolder("jobs.svc"))
	if err != nil {
		t.Fatal(err)
	}
	under, err := sess.Lock(ctx, "jobs.s")
	if err != nil {
		t.Fatal(err)
	}
	sr, err := ops.RevokeSession(ctx, sess.ID())
	if err != nil || len(sr.Revoked) != 1 || sr.Revoked[0].Token != under.Token() {
		t.Fatalf("session revoke: %+v %v", sr, err)
	}
	select {
	case <-under.Done():
	case <-time.After(ttl):
		t.Fatal("the lease under the revoked session still held after its TTL")
	}
	if !errors.Is(sess.Err(), client.ErrRevoked) || !errors.Is(under.Err(), client.ErrRevoked) {
		t.Fatalf("session %v, lease %v: want revoked", sess.Err(), under.Err())
	}

	// A permit.
	p, err := app.AcquirePermit(ctx, "jobs.pool", 1, client.TTL(ttl), client.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ops.RevokePermit(ctx, "jobs.pool", p.Token()); err != nil {
		t.Fatal(err)
	}
	if err := p.Renew(ctx); !errors.Is(err, client.ErrRevoked) {
		t.Fatalf("renewal of a revoked permit: %v", err)
	}
	if st, err := app.Semaphore(ctx, "jobs.pool"); err != nil || len(st.Holders) != 0 {
		t.Fatalf("semaphore after the revoke: %+v %v", st, err)
	}
}
