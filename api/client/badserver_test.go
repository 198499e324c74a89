package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
)

// The Go client against a fake node that answers what no fencer node would
// (issue 26 F5, F6): one subtest per scenario of
// clients/testdata/bad_server.json, the table the Python client's
// tests/test_bad_server.py plays too (its README gives the format).

type badTable struct {
	Grant struct {
		Name      string `json:"name"`
		TTLMillis int64  `json:"ttl_ms"`
	} `json:"grant"`
	Put struct {
		Key   string `json:"key"`
		Value string `json:"value"`
		Token uint64 `json:"token"`
	} `json:"put"`
	Defaults  map[string]badAnswer `json:"defaults"`
	Scenarios []badScenario        `json:"scenarios"`
}

type badAnswer struct {
	Status   int               `json:"status"`
	Headers  map[string]string `json:"headers"`
	Body     *string           `json:"body"`
	PadBytes int               `json:"pad_bytes"`
	NoLength bool              `json:"no_length"`
	DripMs   int               `json:"drip_ms"`
}

type badScenario struct {
	Name          string     `json:"name"`
	Call          string     `json:"call"`
	Expect        string     `json:"expect"`
	TimeoutMillis int64      `json:"timeout_ms"`
	Answer        *badAnswer `json:"answer"`
}

func loadBadTable(t *testing.T) badTable {
	t.Helper()
	b, err := os.ReadFile("../../clients/testdata/bad_server.json")
	if err != nil {
		t.Fatal(err)
	}
	var tb badTable
	if err := json.Unmarshal(b, &tb); err != nil {
		t.Fatal(err)
	}
	return tb
}

// badServer plays one scenario on 127.0.0.1, counting requests per
// operation.
type badServer struct {
	tb  badTable
	sc  badScenario
	srv *httptest.Server

	mu     sync.Mutex
	counts map[string]int
	ttl    int64 // the last acquire's ttl_ms: a renewal's ${ttl_ms}
}

var badOpPath = regexp.MustCompile(`^/v1/(locks|semaphores)/[^/]+/(acquire|renew|release)$`)

func badOp(method, path string) string {
	if strings.HasPrefix(path, "/v1/kv/") && (method == http.MethodPut || method == http.MethodGet) {
		return "put"
	}
	if m := badOpPath.FindStringSubmatch(path); m != nil {
		return m[2]
	}
	return "other"
}

func newBadServer(t *testing.T, tb badTable, sc badScenario) *badServer {
	s := &badServer{tb: tb, sc: sc, counts: map[string]int{}, ttl: tb.Grant.TTLMillis}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *badServer) count(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[op]
}

func (s *badServer) serve(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	redirected := strings.HasPrefix(path, "/redirected/")
	path = strings.TrimPrefix(path, "/redirected")
	op := badOp(r.Method, path)
	var req map[string]any
	json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req)
	s.mu.Lock()
	s.counts[op]++
	if v, ok := req["ttl_ms"].(float64); ok && op == "acquire" {
		s.ttl = int64(v)
	}
	ttl := s.ttl
	s.mu.Unlock()
	str := func(k string) string { v, _ := req[k].(string); return v }
	token := "7"
	if v, ok := req["token"].(float64); ok {
		token = strconv.FormatUint(uint64(v), 10)
	} else if h := r.Header.Get("Fencing-Token"); h != "" {
		token = h
	}
	parts := strings.Split(path, "/")
	values := map[string]string{
		"holder": str("holder"), "ttl_ms": strconv.FormatInt(ttl, 10), "request_id": str("request_id"), "token": token,
	}
	if len(parts) > 3 {
		values["name"] = parts[3]
	}
	if op == "put" {
		values["key"] = strings.TrimPrefix(path, "/v1/kv/")
	}
	a := s.tb.Defaults[op]
	if op == s.sc.Call && s.sc.Answer != nil && !redirected {
		def := a.Body
		a = *s.sc.Answer
		if a.Body == nil {
			a.Body = def
		}
	}
	s.write(w, a, values)
}

var badPlaceholder = regexp.MustCompile(`\$\{(\w+)\}`)

// write sends the answer as raw HTTP/1.1 bytes on the hijacked connection,
// as the Python server does, so both clients read the same bytes.
func (s *badServer) write(w http.ResponseWriter, a badAnswer, values map[string]string) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	body := ""
	if a.Body != nil {
		body = badPlaceholder.ReplaceAllStringFunc(*a.Body, func(m string) string { return values[m[2:len(m)-1]] })
	}
	var head strings.Builder
	fmt.Fprintf(&head, "HTTP/1.1 %d %s\r\n", a.Status, http.StatusText(a.Status))
	headers := map[string]string{"Content-Type": "application/json"}
	for k, v := range a.Headers {
		headers[k] = v
	}
	if !a.NoLength {
		headers["Content-Length"] = strconv.Itoa(max(len(body), a.PadBytes))
	}
	headers["Connection"] = "close"
	for k, v := range headers {
		fmt.Fprintf(&head, "%s: %s\r\n", k, v)
	}
	head.WriteString("\r\n")
	out := bufio.NewWriter(conn)
	if a.DripMs > 0 {
		all := head.String() + body
		for i := 0; i < len(all); i++ {
			out.WriteByte(all[i])
			if out.Flush() != nil {
				return
			}
			time.Sleep(time.Duration(a.DripMs) * time.Millisecond)
		}
		return
	}
	out.WriteString(head.String() + body)
	pad := []byte(strings.Repeat(" ", 64<<10))
	for left := a.PadBytes - len(body); left > 0; left -= len(pad) {
		if _, err := out.Write(pad[:min(left, len(pad))]); err != nil {
			return // the client went away: what it should do with most of these
		}
	}
	out.Flush()
}

func TestBadServer(t *testing.T) {
	tb := loadBadTable(t)
	for _, sc := range tb.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			s := newBadServer(t, tb, sc)
			timeout := 2 * time.Second
			if sc.TimeoutMillis > 0 {
				timeout = time.Duration(sc.TimeoutMillis) * time.Millisecond
			}
			c, err := client.New([]string{s.srv.URL}, client.WithTimeout(timeout), client.WithLogger(nil))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			switch sc.Call {
			case "acquire":
				badAcquire(t, tb, sc, s, c, timeout)
			case "renew":
				badRenew(t, tb, sc, s, c, timeout)
			case "put":
				badPut(t, tb, sc, s, c, timeout)
			default:
				t.Fatalf("unknown call %q", sc.Call)
			}
		})
	}
}

// outcome runs call with the call's deadline and holds its error to the
// scenario's expect.
func outcome(t *testing.T, sc badScenario, s *badServer, op string, timeout time.Duration, call func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	err := call(ctx)
	elapsed := time.Since(start)
	if sc.Answer != nil && sc.Answer.PadBytes > 0 {
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
			t.Errorf("reading a %d-byte answer allocated %d bytes: it was read whole", sc.Answer.PadBytes, grew)
		}
	}
	switch sc.Expect {
	case "ok":
		if err != nil {
			t.Fatalf("want success, got %v", err)
		}
	case "bad_answer":
		if !errors.Is(err, client.ErrBadAnswer) {
			t.Fatalf("want ErrBadAnswer, got %v", err)
		}
		if n := s.count(op); n != 1 {
			t.Fatalf("a bad answer was retried: %d %s requests", n, op)
		}
	case "deadline":
		if err == nil {
			t.Fatal("want an error, got success")
		}
		if elapsed > timeout+time.Second {
			t.Fatalf("a %v call ran %v: %v", timeout, elapsed, err)
		}
	default:
		t.Fatalf("unknown expect %q", sc.Expect)
	}
}

func badAcquire(t *testing.T, tb badTable, sc badScenario, s *badServer, c *client.Client, timeout time.Duration) {
	ttl := time.Duration(tb.Grant.TTLMillis) * time.Millisecond
	var lease *client.Lease
	outcome(t, sc, s, "acquire", timeout, func(ctx context.Context) (err error) {
		lease, err = c.Acquire(ctx, tb.Grant.Name, client.TTL(ttl), client.NoKeepAlive())
		return err
	})
	if sc.Expect == "ok" {
		if lease.Name() != tb.Grant.Name || lease.Token() != 7 || lease.TTL() != ttl || lease.Secret() != "0123456789abcdef0123456789abcdef" {
			t.Fatalf("lease %+v", lease.Grant())
		}
		lease.Release(t.Context())
	}
	// AcquireRaw checks its grant as Acquire does.
	if sc.Expect == "bad_answer" {
		_, err := c.AcquireRaw(t.Context(), tb.Grant.Name, wire.AcquireRequest{Holder: "bad-server-test", TTLMillis: tb.Grant.TTLMillis})
		if !errors.Is(err, client.ErrBadAnswer) {
			t.Fatalf("AcquireRaw: want ErrBadAnswer, got %v", err)
		}
	}
}

func badPut(t *testing.T, tb badTable, sc badScenario, s *badServer, c *client.Client, timeout time.Duration) {
	outcome(t, sc, s, "put", timeout, func(ctx context.Context) error {
		return c.PutFenced(ctx, tb.Put.Key, []byte(tb.Put.Value), tb.Put.Token)
	})
}

func badRenew(t *testing.T, tb badTable, sc badScenario, s *badServer, c *client.Client, timeout time.Duration) {
	ttl := time.Duration(tb.Grant.TTLMillis) * time.Millisecond
	lease, err := c.Acquire(t.Context(), tb.Grant.Name, client.TTL(ttl), client.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	before := lease.Deadline()
	outcome(t, sc, s, "renew", timeout, lease.Renew)
	if moved := lease.Deadline().After(before); moved != (sc.Expect == "ok") {
		t.Fatalf("the renewal moved the deadline: %v", moved)
	}
	lease.Release(t.Context())

	// Kept alive: renewals that get bad answers confirm nothing, so the
	// lease ends by its local deadline, within its TTL.
	sent := time.Now()
	kept, err := c.Acquire(t.Context(), tb.Grant.Name, client.TTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kept.Release(context.Background()) })
	if sc.Expect == "ok" {
		select {
		case <-kept.Done():
			t.Fatalf("renewed by good answers, the lease was lost: %v", kept.Err())
		case <-time.After(2 * ttl):
		}
		return
	}
	select {
	case <-kept.Done():
	case <-time.After(2 * ttl):
		t.Fatalf("renewals answered %s: the lease is still held %v after its acquire", sc.Name, time.Since(sent))
	}
	if after := time.Since(sent); after > ttl+50*time.Millisecond {
		t.Fatalf("the lease was held %v after its acquire, past its TTL", after)
	}
	if !errors.Is(kept.Err(), client.ErrLeaseExpired) {
		t.Fatalf("want ErrLeaseExpired, got %v", kept.Err())
	}
	switch n := s.count("renew") - 1; {
	case n < 1:
		t.Fatal("the keep-alive never renewed: the scenario tested nothing")
	case n > 20:
		t.Fatalf("%d renewals in one TTL: failed ones are resent in a loop", n)
	}
}
