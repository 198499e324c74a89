package fence

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/api/wire"
)

// fencedPut stores the request body under the last path segment.
func fencedPut(t *testing.T, s *Store) http.Handler {
	key := func(r *http.Request) string { return strings.TrimPrefix(r.URL.Path, "/") }
	return Middleware(s, key)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx := TxFromContext(r.Context())
		if tx == nil {
			t.Error("no Tx in context")
			http.Error(w, "no tx", http.StatusInternalServerError)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if string(body) == "refuse" {
			_ = tx.Put(tx.Key(), body)
			http.Error(w, "refused by handler", http.StatusUnprocessableEntity)
			return
		}
		if err := tx.Put(tx.Key(), body); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("X-Stored", tx.Key())
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "stored")
	}))
}

func do(h http.Handler, key, body string, headers ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPut, "/"+key, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Add(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func decodeErrorBody(t *testing.T, w *httptest.ResponseRecorder) wire.Error {
	t.Helper()
	var b wire.Error
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	return b
}

func TestMiddlewareStatuses(t *testing.T) {
	s := openTestStore(t, nil)
	h := fencedPut(t, s)

	w := do(h, "k", "v7", wire.HeaderToken, "7")
	if w.Code != http.StatusOK || w.Body.String() != "stored" || w.Header().Get("X-Stored") != "k" {
		t.Fatalf("token 7: %d %q %v", w.Code, w.Body.String(), w.Header())
	}

	for _, hdrs := range [][]string{
		nil,
		{wire.HeaderToken, ""},
		{wire.HeaderToken, "0"},
		{wire.HeaderToken, "abc"},
		{wire.HeaderToken, "-8"},
		{wire.HeaderToken, "8", wire.HeaderToken, "9"},
	} {
		w := do(h, "k", "bad", hdrs...)
		if w.Code != http.StatusPreconditionRequired {
			t.Fatalf("headers %q: status %d, want 428", hdrs, w.Code)
		}
		if b := decodeErrorBody(t, w); b.Code != "missing_token" || b.Message == "" {
			t.Fatalf("headers %q: body %+v", hdrs, b)
		}
	}

	for _, token := range []string{"6", "7"} {
		w := do(h, "k", "bad", wire.HeaderToken, token)
		if w.Code != http.StatusConflict {
			t.Fatalf("token %s: status %d, want 409", token, w.Code)
		}
		if b := decodeErrorBody(t, w); b.Code != "stale_token" || b.LastToken != 7 {
			t.Fatalf("token %s: body %+v", token, b)
		}
	}

	if w := do(h, "k", "bad", wire.HeaderToken, "8", wire.HeaderSequence, "0"); w.Code != http.StatusBadRequest {
		t.Fatalf("sequence 0: status %d, want 400", w.Code)
	}
	if got := get(t, s, "k"); got != "v7" {
		t.Fatalf("value after refusals = %q, want v7", got)
	}
	if m := mustHighWater(t, s, "k"); m != (Mark{Token: 7}) {
		t.Fatalf("mark after refusals = %+v", m)
	}
}

func TestMiddlewareSequence(t *testing.T) {
	s := openTestStore(t, nil)
	h := fencedPut(t, s)
	steps := []struct {
		seq  string
		want int
	}{
		{"1", http.StatusOK},
		{"2", http.StatusOK},
		{"2", http.StatusConflict},
		{"", http.StatusConflict},
		{"3", http.StatusOK},
	}
	for i, st := range steps {
		hdrs := []string{wire.HeaderToken, "4"}
		if st.seq != "" {
			hdrs = append(hdrs, wire.HeaderSequence, st.seq)
		}
		if w := do(h, "k", "v", hdrs...); w.Code != st.want {
			t.Fatalf("step %d seq %q: status %d, want %d", i, st.seq, w.Code, st.want)
		}
	}
	if m := mustHighWater(t, s, "k"); m != (Mark{Token: 4, Seq: 3}) {
		t.Fatalf("mark = %+v", m)
	}
}

func TestMiddlewareHandlerFailureRollsBack(t *testing.T) {
	s := openTestStore(t, nil)
	h := fencedPut(t, s)
	if w := do(h, "k", "v1", wire.HeaderToken, "1"); w.Code != http.StatusOK {
		t.Fatal(w.Code)
	}
	w := do(h, "k", "refuse", wire.HeaderToken, "5")
	if w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "refused by handler") {
		t.Fatalf("handler refusal: %d %q", w.Code, w.Body.String())
	}
	if got, m := get(t, s, "k"), mustHighWater(t, s, "k"); got != "v1" || m.Token != 1 {
		t.Fatalf("after refusal: value %q mark %+v", got, m)
	}
	if w := do(h, "k", "v5", wire.HeaderToken, "5"); w.Code != http.StatusOK {
		t.Fatalf("token 5 after a refused attempt: %d", w.Code)
	}
}

func TestMiddlewareFailureAfterHandlerIs500(t *testing.T) {
	s := openTestStore(t, nil)
	// bbolt refuses keys over 32 KiB, so recording the mark for this key
	// fails after the handler has already answered 200: the buffered 200
	// must not be sent, and the handler's write must not survive.
	longKey := strings.Repeat("k", 40000)
	h := Middleware(s, func(*http.Request) string { return longKey })(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := TxFromContext(r.Context()).Put("other", []byte("x")); err != nil {
			t.Error(err)
		}
		_, _ = io.WriteString(w, "looks fine")
	}))
	w := do(h, "k", "v", wire.HeaderToken, "1")
	if w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "looks fine") {
		t.Fatalf("failed commit: %d %q", w.Code, w.Body.String())
	}
	if b := decodeErrorBody(t, w); b.Code != "internal" {
		t.Fatalf("body %+v", b)
	}
	if got := get(t, s, "other"); got != "" {
		t.Fatalf("handler write survived a failed commit: %q", got)
	}
}

func TestMiddlewareEmptyKeyAndBodyLimit(t *testing.T) {
	s := openTestStore(t, nil)
	h := fencedPut(t, s)
	if w := do(h, "", "v", wire.HeaderToken, "1"); w.Code != http.StatusBadRequest {
		t.Fatalf("empty key: %d", w.Code)
	}
	big := strings.Repeat("x", MaxBodyBytes+1)
	if w := do(h, "k", big, wire.HeaderToken, "1"); w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("big body: %d", w.Code)
	}
	if m := mustHighWater(t, s, "k"); m.Token != 0 {
		t.Fatalf("mark moved: %+v", m)
	}
}

func TestStatusFor(t *testing.T) {
	for err, want := range map[error]int{
		ErrMissingToken:               428,
		&StaleError{}:                 409,
		ErrMalformedSequence:          400,
		ErrEmptyKey:                   400,
		errors.New("disk on fire"):    500,
		&http.MaxBytesError{Limit: 1}: 413,
	} {
		if got := StatusFor(err); got != want {
			t.Errorf("StatusFor(%v) = %d, want %d", err, got, want)
		}
	}
}
