package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
)

// The credential options set the one Authorization header every request
// carries, the last option winning; an empty bearer token sends none.
func TestCredentialOptions(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Values("Authorization")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"node":"n1","members":[]}`))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name string
		opts []client.Option
		want []string
	}{
		{"none", nil, nil},
		{"empty bearer token", []client.Option{client.WithBearerToken("")}, nil},
		{"bearer token", []client.Option{client.WithBearerToken("tok-0123456789abcdef")}, []string{"Bearer tok-0123456789abcdef"}},
		{"node credential", []client.Option{client.WithNodeCredential("n2", "cluster-secret")}, []string{wire.NodeAuthorization("n2", "cluster-secret")}},
		{"node credential, then a token", []client.Option{client.WithNodeCredential("n2", "cluster-secret"), client.WithBearerToken("tok-0123456789abcdef")},
			[]string{"Bearer tok-0123456789abcdef"}},
	} {
		c, err := client.New([]string{srv.URL}, append(tc.opts, client.WithRetry(client.Retry{Attempts: 1}))...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.MemberStatus(context.Background(), srv.URL); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		mu.Lock()
		if len(got) != len(tc.want) || len(got) > 0 && got[0] != tc.want[0] {
			t.Errorf("%s: Authorization %q, want %q", tc.name, got, tc.want)
		}
		mu.Unlock()
	}
}
