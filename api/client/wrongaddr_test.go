package client_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/api/client"
)

// wrongClient is a client of one endpoint that tries once.
func wrongClient(t *testing.T, endpoint string) *client.Client {
	t.Helper()
	c, err := client.New([]string{endpoint}, client.WithTimeout(2*time.Second), client.WithRetry(client.Retry{Attempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// A client pointed at a Raft port, which hangs up without a word, says so
// instead of answering "EOF".
func TestRaftPortIsNamed(t *testing.T) {
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { trans.Close() })
	c := wrongClient(t, string(trans.LocalAddr()))
	for name, call := range map[string]func() error{
		"GET":  func() error { _, err := c.Lock(t.Context(), "x"); return err },
		"POST": func() error { _, err := c.Acquire(t.Context(), "x", client.NoKeepAlive()); return err },
	} {
		err := call()
		if !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "this looks like a Raft port, not fencer's HTTP API") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A client pointed at an HTTP server that is not fencer says so, rather than
// "HTTP 404: Not Found"; fencer's own 404s keep their meaning.
func TestNotFencerNode(t *testing.T) {
	other := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(other.Close)
	_, err := wrongClient(t, other.URL).Lock(t.Context(), "x")
	if !errors.Is(err, client.ErrNotFencer) || !strings.Contains(err.Error(), other.URL+" is not a fencer node") {
		t.Fatalf("plain 404: %v", err)
	}
	var api *client.APIError
	if !errors.As(err, &api) || api.Status != http.StatusNotFound {
		t.Fatalf("the answer is lost from the error: %v", err)
	}

	fencerLike := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":"key \"k\" has never been written","code":"not_found"}`)
	}))
	t.Cleanup(fencerLike.Close)
	_, _, err = wrongClient(t, fencerLike.URL).Get(t.Context(), "k")
	if !errors.Is(err, client.ErrNotFound) || errors.Is(err, client.ErrNotFencer) {
		t.Fatalf("fencer's 404: %v", err)
	}
}
