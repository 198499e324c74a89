package acl

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A fenced write that names a lock reads that lock's current token: the
// lock must be within the principal's lock prefixes.
func TestFencingLockScoped(t *testing.T) {
	mw := Middleware(testStore(t))
	for _, tc := range []struct {
		secret string
		locks  []string
		want   int
	}{
		{scopedSecret, nil, 200},
		{scopedSecret, []string{"jobs.l"}, 200},
		{scopedSecret, []string{"other.l"}, 403},
		{scopedSecret, []string{"jobs.l", "other.l"}, 403},
		{scopedSecret, []string{"other.l", "jobs.l"}, 403},
		{scopedSecret, []string{""}, 200}, // no lock named: the write is fenced by its token only
		{clientSecret, []string{"other.l"}, 200},
		{readerSecret, []string{"jobs.l"}, 403}, // readers never write
	} {
		reached := false
		req := httptest.NewRequest("PUT", "/v1/kv/jobs.report", nil)
		req.Header.Set("Authorization", "Bearer "+tc.secret)
		for _, l := range tc.locks {
			req.Header.Add("Fencing-Lock", l)
		}
		rec := httptest.NewRecorder()
		mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true })).ServeHTTP(rec, req)
		if rec.Code != tc.want || reached != (tc.want == 200) {
			t.Errorf("%s with Fencing-Lock %q: %d (reached %v), want %d", tc.secret[:6], tc.locks, rec.Code, reached, tc.want)
		}
	}
}

// A listing shows a principal only the locks within its prefixes.
func TestLockVisible(t *testing.T) {
	a, err := Parse([]byte(testFile))
	if err != nil {
		t.Fatal(err)
	}
	principal := func(secret string) context.Context {
		req := httptest.NewRequest("GET", "/v1/locks", nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		p, err := a.Authenticate(req)
		if err != nil {
			t.Fatal(err)
		}
		return context.WithValue(context.Background(), principalKey{}, p)
	}
	scoped, reader := principal(scopedSecret), principal(readerSecret)
	for name, want := range map[string]bool{"jobs.a": true, "jobs.": true, "job": false, "other": false} {
		if got := LockVisible(scoped, name); got != want {
			t.Errorf("scoped principal sees %q: %v, want %v", name, got, want)
		}
		if !LockVisible(reader, name) || !LockVisible(context.Background(), name) {
			t.Errorf("%q hidden from an unscoped reader or without an ACL", name)
		}
	}
}

// A multi-lock is allowed only when every name is within the principal's
// prefixes; the first that is not is named.
func TestNamesAllowed(t *testing.T) {
	a, err := Parse([]byte(testFile))
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "/v1/locks/acquire", nil)
	req.Header.Set("Authorization", "Bearer "+scopedSecret)
	p, err := a.Authenticate(req)
	if err != nil {
		t.Fatal(err)
	}
	scoped := context.WithValue(context.Background(), principalKey{}, p)
	if name, ok := NamesAllowed(scoped, ActionAcquire, []string{"jobs.a", "jobs.b"}); !ok || name != "" {
		t.Fatalf("names in scope: %q %v", name, ok)
	}
	if name, ok := NamesAllowed(scoped, ActionAcquire, []string{"jobs.a", "other", "job"}); ok || name != "other" {
		t.Fatalf("a name out of scope: %q %v", name, ok)
	}
	if _, ok := NamesAllowed(context.Background(), ActionAcquire, []string{"other"}); !ok {
		t.Fatal("refused without an ACL")
	}
}
