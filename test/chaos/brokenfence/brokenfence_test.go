package brokenfence

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fence"
	"github.com/fencer-io/fencer/fence/resource"
)

func openStore(t *testing.T, path string) *fence.Store {
	t.Helper()
	st, err := fence.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

type testServer struct {
	t    *testing.T
	http *httptest.Server
}

func start(t *testing.T, h http.Handler) *testServer {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testServer{t: t, http: srv}
}

// put sends a PUT with the given headers (name, value pairs) and returns
// the status and body.
func (s *testServer) put(key, value string, headers ...string) (int, string) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPut, s.http.URL+"/v1/data/"+key, strings.NewReader(value))
	if err != nil {
		s.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	code, body, _ := s.do(req)
	return code, body
}

func (s *testServer) do(req *http.Request) (int, string, http.Header) {
	s.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// value returns key's value and the token of the write that stored it, as
// the real server reads them.
func (s *testServer) value(key string) (string, string) {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.http.URL+"/v1/data/"+key, nil)
	code, body, h := s.do(req)
	if code != http.StatusOK {
		s.t.Fatalf("GET %s: %d %s", key, code, body)
	}
	return body, h.Get(wire.HeaderToken)
}

func (s *testServer) highWater(key string) resource.MarkResponse {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.http.URL+"/v1/high-water/"+key, nil)
	code, body, _ := s.do(req)
	var m resource.MarkResponse
	if err := json.Unmarshal([]byte(body), &m); code != http.StatusOK || err != nil {
		s.t.Fatalf("GET high-water %s: %d %s", key, code, body)
	}
	return m
}

func TestMissingAsZeroAcceptsTokenlessWrite(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "r.db"))
	defer st.Close()
	s := start(t, NewServer(st, MissingAsZero))

	if code, _ := s.put("k", "from-6", wire.HeaderToken, "6"); code != http.StatusOK {
		t.Fatal(code)
	}
	// Tokens that are present are still checked...
	if code, _ := s.put("k", "stale", wire.HeaderToken, "5"); code != http.StatusConflict {
		t.Fatalf("PUT 5: %d, want 409", code)
	}
	// ...but a write without one overwrites the newer grant's value.
	if code, body := s.put("k", "tokenless"); code != http.StatusOK {
		t.Fatalf("tokenless PUT on broken server: %d %s, want 200", code, body)
	}
	if v, tok := s.value("k"); v != "tokenless" || tok != "0" {
		t.Fatalf("value %q token %q, want tokenless/0", v, tok)
	}
	// Malformed tokens are still refused; only absence is misread.
	if code, _ := s.put("k", "x", wire.HeaderToken, "abc"); code != http.StatusPreconditionRequired {
		t.Fatalf("malformed token: %d", code)
	}
	// The real mark did not move, so a correct server over the same store
	// still refuses 6.
	good := start(t, resource.NewServer(st))
	if code, _ := good.put("k", "x", wire.HeaderToken, "6"); code != http.StatusConflict {
		t.Fatalf("correct server, PUT 6: %d", code)
	}
}

func TestForgetOnRestartAcceptsOlderToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	st := openStore(t, path)
	s := start(t, NewServer(st, ForgetOnRestart))
	if code, _ := s.put("k", "v34", wire.HeaderToken, "34"); code != http.StatusOK {
		t.Fatal(code)
	}
	// Before the restart it looks correct.
	if code, _ := s.put("k", "v33", wire.HeaderToken, "33"); code != http.StatusConflict {
		t.Fatalf("PUT 33 before restart: %d, want 409", code)
	}
	if code, _ := s.put("k", "none"); code != http.StatusPreconditionRequired {
		t.Fatalf("tokenless PUT: %d, want 428", code)
	}
	s.http.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openStore(t, path)
	defer st.Close()
	s = start(t, NewServer(st, ForgetOnRestart))
	if v, tok := s.value("k"); v != "v34" || tok != "34" {
		t.Fatalf("value survived as %q/%q", v, tok)
	}
	if m := s.highWater("k"); m.Token != 0 {
		t.Fatalf("broken server remembered %+v", m)
	}
	if code, _ := s.put("k", "v33", wire.HeaderToken, "33"); code != http.StatusOK {
		t.Fatalf("PUT 33 after restart on broken server: %d, want 200", code)
	}
	if v, tok := s.value("k"); v != "v33" || tok != "33" {
		t.Fatalf("value %q/%q, want the stale v33/33", v, tok)
	}
}

func TestBothModes(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "r.db"))
	defer st.Close()
	s := start(t, NewServer(st, MissingAsZero|ForgetOnRestart))
	if code, _ := s.put("k", "v9", wire.HeaderToken, "9"); code != http.StatusOK {
		t.Fatal(code)
	}
	if code, _ := s.put("k", "v8", wire.HeaderToken, "8"); code != http.StatusConflict {
		t.Fatalf("PUT 8: %d", code)
	}
	if code, _ := s.put("k", "none"); code != http.StatusOK {
		t.Fatalf("tokenless PUT: %d", code)
	}
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
