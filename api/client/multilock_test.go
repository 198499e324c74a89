package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// On a real 3-node cluster: a MultiLock holds every name with one token,
// kept alive past several TTLs by one renewal each time; another that
// meets one of its names gets none, told which; a Fencing-Lock write under
// any name passes with the token; a name cannot be released alone; and
// Release frees every name at once for the next holder.
func TestMultiLockOnACluster(t *testing.T) {
	c := tc.New(t, 3)
	cl, _ := newClient(t, c)
	other, _ := newClient(t, c)
	ctx := context.Background()
	const ttl = time.Second
	m, err := cl.MultiLock(ctx, []string{"acct.b", "acct.a", "acct.c"}, client.TTL(ttl), client.Holder("transfer-1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range m.Names() {
		st, err := other.Lock(ctx, n)
		if err != nil || !st.Held || st.Token != m.Token() || st.Holder != "transfer-1" {
			t.Fatalf("%s: %+v %v", n, st, err)
		}
	}
	_, err = other.MultiLock(ctx, []string{"acct.x", "acct.c"}, client.TTL(ttl))
	var apiErr *client.APIError
	if !errors.Is(err, client.ErrLockHeld) || !errors.As(err, &apiErr) || apiErr.Lock != "acct.c" || apiErr.Token != m.Token() {
		t.Fatalf("overlapping multi-lock: %v", err)
	}
	if st, _ := other.Lock(ctx, "acct.x"); st.Held {
		t.Fatal("acct.x granted by a refused multi-lock")
	}
	select {
	case <-m.Done():
		t.Fatalf("multi-lock lost: %v", m.Err())
	case <-time.After(3 * ttl):
	}
	if err := cl.PutFenced(ctx, "ledger", []byte("moved"), m.Token(), client.WithLock("acct.a")); err != nil {
		t.Fatalf("fenced write under a multi-lock's name: %v", err)
	}
	if _, err := other.ReleaseRaw(ctx, "acct.b", m.Token(), m.Secret()); !errors.Is(err, client.ErrMultiGrant) {
		t.Fatalf("release of one name: %v", err)
	}
	if err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(m.Err(), client.ErrReleased) {
		t.Fatalf("after release: %v", m.Err())
	}
	next, err := other.MultiLock(ctx, []string{"acct.c", "acct.a"}, client.TTL(ttl))
	if err != nil || next.Token() <= m.Token() {
		t.Fatalf("multi-lock after the release: %v", err)
	}
	next.Release(ctx)
	if _, err := cl.MultiLock(ctx, []string{"a", "a"}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("a name twice: %v", err)
	}
}
