package resource

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
)

type testServer struct {
	t    *testing.T
	http *httptest.Server
}

func openStore(t *testing.T, path string) *fence.Store {
	t.Helper()
	st, err := fence.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func startServer(t *testing.T, st *fence.Store) *testServer {
	t.Helper()
	srv := httptest.NewServer(NewServer(st))
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
	return s.do(req)
}

func (s *testServer) get(path string) (int, string, http.Header) {
	s.t.Helper()
	resp, err := http.Get(s.http.URL + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func (s *testServer) do(req *http.Request) (int, string) {
	s.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// value returns key's value and the token of the write that stored it.
func (s *testServer) value(key string) (string, string) {
	s.t.Helper()
	code, body, h := s.get("/v1/data/" + key)
	if code != http.StatusOK {
		s.t.Fatalf("GET %s: %d %s", key, code, body)
	}
	return body, h.Get(wire.HeaderToken)
}

func (s *testServer) highWater(key string) MarkResponse {
	s.t.Helper()
	code, body, _ := s.get("/v1/high-water/" + key)
	if code != http.StatusOK {
		s.t.Fatalf("GET high-water %s: %d %s", key, code, body)
	}
	var m MarkResponse
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		s.t.Fatal(err)
	}
	return m
}

func TestServerFencesWrites(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "r.db"))
	defer st.Close()
	s := startServer(t, st)

	if code, body, _ := s.get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("healthz: %d %q", code, body)
	}
	if code, body, _ := s.get("/v1/data/k"); code != http.StatusNotFound || !strings.Contains(body, `"not_found"`) {
		t.Fatalf("GET absent: %d %s", code, body)
	}

	if code, body := s.put("k", "from-6", wire.HeaderToken, "6"); code != http.StatusOK || !strings.Contains(body, `"token":6`) {
		t.Fatalf("PUT 6: %d %s", code, body)
	}
	for _, tc := range []struct {
		headers []string
		code    int
		errCode string
	}{
		{nil, http.StatusPreconditionRequired, "missing_token"},
		{[]string{wire.HeaderToken, "0"}, http.StatusPreconditionRequired, "missing_token"},
		{[]string{wire.HeaderToken, "x"}, http.StatusPreconditionRequired, "missing_token"},
		{[]string{wire.HeaderToken, "5"}, http.StatusConflict, "stale_token"},
		{[]string{wire.HeaderToken, "6"}, http.StatusConflict, "stale_token"},
	} {
		code, body := s.put("k", "bad", tc.headers...)
		if code != tc.code || !strings.Contains(body, `"code":"`+tc.errCode+`"`) {
			t.Fatalf("PUT %q: %d %s, want %d %s", tc.headers, code, body, tc.code, tc.errCode)
		}
		if tc.code == http.StatusConflict && !strings.Contains(body, `"last_token":6`) {
			t.Fatalf("409 body lacks last_token: %s", body)
		}
	}
	if v, tok := s.value("k"); v != "from-6" || tok != "6" {
		t.Fatalf("value %q token %q, want from-6/6", v, tok)
	}

	// Several writes under one grant, numbered.
	for _, seq := range []string{"1", "2"} {
		if code, body := s.put("k", "from-7/"+seq, wire.HeaderToken, "7", wire.HeaderSequence, seq); code != http.StatusOK {
			t.Fatalf("PUT 7/%s: %d %s", seq, code, body)
		}
	}
	if code, _ := s.put("k", "replay", wire.HeaderToken, "7", wire.HeaderSequence, "2"); code != http.StatusConflict {
		t.Fatalf("replay 7/2: %d", code)
	}
	code, _, h := s.get("/v1/data/k")
	if code != http.StatusOK || h.Get(wire.HeaderToken) != "7" || h.Get(wire.HeaderSequence) != "2" {
		t.Fatalf("GET after 7/2: %d %v", code, h)
	}
	if m := s.highWater("k"); m != (MarkResponse{Key: "k", Token: 7, Seq: 2}) {
		t.Fatalf("high-water = %+v", m)
	}
	// Per-key fence: another key starts from nothing.
	if code, _ := s.put("other", "v", wire.HeaderToken, "1"); code != http.StatusOK {
		t.Fatalf("PUT other/1: %d", code)
	}
}

func TestServerMarkSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	st := openStore(t, path)
	s := startServer(t, st)
	if code, _ := s.put("k", "v34", wire.HeaderToken, "34"); code != http.StatusOK {
		t.Fatal(code)
	}
	s.http.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openStore(t, path)
	defer st.Close()
	s = startServer(t, st)
	if code, _ := s.put("k", "v33", wire.HeaderToken, "33"); code != http.StatusConflict {
		t.Fatalf("PUT 33 after restart: %d, want 409", code)
	}
	if v, tok := s.value("k"); v != "v34" || tok != "34" {
		t.Fatalf("value %q/%q", v, tok)
	}
}
