package brokenfence

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fence"
	"github.com/fencer-io/fencer/fence/resource"
)

// step is one request and the answer it must get. A put sends value with
// token (none if "") as Fencing-Token; a get must find want as
// "value@token", read by the real resource server; a mark must find want
// as the token of the high-water mark the server reports.
type step struct {
	op, value, token string
	code             int
	want             string
}

func put(value, token string, code int) step {
	return step{op: "put", value: value, token: token, code: code}
}
func get(want string) step  { return step{op: "get", code: http.StatusOK, want: want} }
func mark(want string) step { return step{op: "mark", code: http.StatusOK, want: want} }

// run sends each step to h for key "k".
func run(t *testing.T, h http.Handler, steps ...step) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	for i, s := range steps {
		method, path := http.MethodGet, "/v1/data/k"
		switch s.op {
		case "put":
			method = http.MethodPut
		case "mark":
			path = "/v1/high-water/k"
		}
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(s.value))
		if s.token != "" {
			req.Header.Set(wire.HeaderToken, s.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := string(body)
		switch s.op {
		case "get":
			got += "@" + resp.Header.Get(wire.HeaderToken)
		case "mark":
			var m resource.MarkResponse
			json.Unmarshal(body, &m)
			got = strconv.FormatUint(m.Token, 10)
		}
		if resp.StatusCode != s.code || s.want != "" && got != s.want {
			t.Fatalf("step %d (%s %q token %q): %d %q, want %d %q", i, s.op, s.value, s.token, resp.StatusCode, got, s.code, s.want)
		}
	}
}

// openStore opens a store that is closed when the test ends, if it is
// still open.
func openStore(t *testing.T, path string) *fence.Store {
	st, err := fence.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestMissingAsZeroAcceptsTokenlessWrite(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "r.db"))
	run(t, NewServer(st, MissingAsZero),
		put("from-6", "6", http.StatusOK),
		put("stale", "5", http.StatusConflict), // tokens that are present are still checked...
		put("tokenless", "", http.StatusOK),    // ...but a write without one overwrites the newer grant's value
		get("tokenless@0"),
		put("x", "abc", http.StatusPreconditionRequired), // only absence is misread
	)
	// The real mark did not move, so a correct server over the same store
	// still refuses 6.
	run(t, resource.NewServer(st), put("x", "6", http.StatusConflict))
}

func TestForgetOnRestartAcceptsOlderToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	st := openStore(t, path)
	run(t, NewServer(st, ForgetOnRestart),
		put("v34", "34", http.StatusOK),
		put("v33", "33", http.StatusConflict), // before the restart it looks correct
		put("none", "", http.StatusPreconditionRequired),
	)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openStore(t, path)
	run(t, NewServer(st, ForgetOnRestart),
		get("v34@34"), // the value survived, the mark did not
		mark("0"),
		put("v33", "33", http.StatusOK),
		get("v33@33"),
	)
}

func TestBothModes(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "r.db"))
	run(t, NewServer(st, MissingAsZero|ForgetOnRestart),
		put("v9", "9", http.StatusOK),
		put("v8", "8", http.StatusConflict),
		put("none", "", http.StatusOK),
	)
}

func TestParseMode(t *testing.T) {
	for s, want := range map[string]Mode{
		"":                                   0,
		"missing-as-zero":                    MissingAsZero,
		"forget-on-restart":                  ForgetOnRestart,
		"missing-as-zero, forget-on-restart": MissingAsZero | ForgetOnRestart,
	} {
		if got, err := ParseMode(s); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseMode("off-by-one"); err == nil {
		t.Error("unknown mode accepted")
	}
}
