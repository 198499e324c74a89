package redisfence

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fence"
)

// These tests need a real redis-server: scripts/with-redis.sh go test ...
// starts one. Without FENCER_TEST_REDIS_ADDR they skip, unless
// FENCER_REQUIRE_REDIS=1 makes the absence a failure (CI must not pass by
// skipping).

func requireRedis(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("FENCER_REQUIRE_REDIS") == "1" {
		t.Fatalf("%s is unset but FENCER_REQUIRE_REDIS=1; run the tests under scripts/with-redis.sh", what)
	}
	t.Skipf("%s is unset; run the tests under scripts/with-redis.sh (FENCER_REQUIRE_REDIS=1 makes this a failure)", what)
}

func testClient(t *testing.T) *redis.Client {
	t.Helper()
	addr := os.Getenv("FENCER_TEST_REDIS_ADDR")
	if addr == "" {
		requireRedis(t, "FENCER_TEST_REDIS_ADDR")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 16})
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("ping %s: %v", addr, err)
	}
	return rdb
}

// uniqueScope keeps the tests of one run, which share a server, apart.
func uniqueScope(t *testing.T) string {
	return fmt.Sprintf("%s/%d", t.Name(), time.Now().UnixNano())
}

func mustHighWater(t *testing.T, rdb MarkReader, scope string) fence.Mark {
	t.Helper()
	m, err := HighWater(context.Background(), rdb, scope)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func get(t *testing.T, rdb *redis.Client, key string) string {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return v
}

func put(ctx context.Context, rdb redis.Scripter, key string, token, seq uint64, value string) error {
	_, err := ExecSeq(ctx, rdb, key, token, seq, Set(key, value))
	return err
}

func TestLateOlderWriterLoses(t *testing.T) {
	rdb := testClient(t)
	ctx := context.Background()
	key := uniqueScope(t)

	if err := put(ctx, rdb, key, 6, 0, "six"); err != nil {
		t.Fatal(err)
	}
	err := put(ctx, rdb, key, 5, 0, "five")
	var se *fence.StaleError
	if !errors.As(err, &se) || !errors.Is(err, fence.ErrStaleToken) || se.HighWater != 6 || se.Token != 5 || se.Key != key {
		t.Fatalf("token 5 after 6: err = %v", err)
	}
	if fence.Code(err) != wire.CodeStaleToken {
		t.Fatalf("code = %q", fence.Code(err))
	}
	if got := get(t, rdb, key); got != "six" {
		t.Fatalf("value = %q, want six", got)
	}
	if err := put(ctx, rdb, key, 6, 0, "six again"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("replay of 6: err = %v", err)
	}
	if got := get(t, rdb, key); got != "six" {
		t.Fatalf("value after replay = %q, want six", got)
	}
	if m := mustHighWater(t, rdb, key); m != (fence.Mark{Token: 6}) {
		t.Fatalf("mark = %+v", m)
	}
}

func TestSequence(t *testing.T) {
	rdb := testClient(t)
	ctx := context.Background()
	key := uniqueScope(t)
	steps := []struct {
		token, seq uint64
		ok         bool
	}{
		{5, 1, true}, {5, 2, true}, {5, 2, false}, {5, 1, false}, {5, 0, false},
		{4, 9, false}, {6, 0, true}, {6, 0, false}, {6, 1, true},
	}
	for i, st := range steps {
		err := put(ctx, rdb, key, st.token, st.seq, fmt.Sprintf("%d/%d", st.token, st.seq))
		if st.ok != (err == nil) || (!st.ok && !errors.Is(err, fence.ErrStaleToken)) {
			t.Fatalf("step %d (%d/%d): err = %v, want ok=%v", i, st.token, st.seq, err, st.ok)
		}
	}
	if m, v := mustHighWater(t, rdb, key), get(t, rdb, key); m != (fence.Mark{Token: 6, Seq: 1}) || v != "6/1" {
		t.Fatalf("mark = %+v, value %q", m, v)
	}
}

// TestTokensAboveTwoToThe53 checks that tokens are compared exactly: as Lua
// numbers (doubles) 2^53 and 2^53+1 are equal, and the second would be
// refused as a replay, or the first let back in after it.
func TestTokensAboveTwoToThe53(t *testing.T) {
	rdb := testClient(t)
	ctx := context.Background()
	key := uniqueScope(t)
	const big = 1 << 53
	for _, st := range []struct {
		token uint64
		ok    bool
	}{{big, true}, {big + 1, true}, {big, false}, {math.MaxUint64 - 1, true}, {math.MaxUint64, true}, {math.MaxUint64, false}} {
		err := put(ctx, rdb, key, st.token, 0, strconv.FormatUint(st.token, 10))
		if st.ok != (err == nil) || (!st.ok && !errors.Is(err, fence.ErrStaleToken)) {
			t.Fatalf("token %d: err = %v, want ok=%v", st.token, err, st.ok)
		}
	}
	if m := mustHighWater(t, rdb, key); m != (fence.Mark{Token: math.MaxUint64}) {
		t.Fatalf("mark = %+v", m)
	}
}

// TestScriptFailsClosed sends the script what a client other than this
// package might (the Python one, a hand-written EVALSHA): it must refuse
// every token that is not a canonical decimal in 1..2^64-1 by itself.
func TestScriptFailsClosed(t *testing.T) {
	rdb := testClient(t)
	ctx := context.Background()
	key := uniqueScope(t)
	if _, err := ExecSeq(ctx, rdb, key, 0, 0, Set(key, "zero")); !errors.Is(err, fence.ErrMissingToken) || fence.Code(err) != wire.CodeMissingToken {
		t.Fatalf("token 0: %v", err)
	}
	if _, err := ExecSeq(ctx, rdb, "", 1, 0); !errors.Is(err, fence.ErrEmptyKey) {
		t.Fatalf("empty scope: %v", err)
	}
	eval := func(token, seq string) error {
		_, err := script.Run(ctx, rdb, []string{MarkKey(key), key}, token, seq, 1, "SET", 1, 1, "x").Result()
		return scriptError(key, []Cmd{Set(key, "x")}, err)
	}
	for _, bad := range []string{"", "0", "05", "-1", "+1", " 1", "1.0", "1e3", "18446744073709551616", "99999999999999999999"} {
		if err := eval(bad, "0"); !errors.Is(err, fence.ErrMissingToken) {
			t.Errorf("token %q: err = %v, want missing token", bad, err)
		}
	}
	for _, bad := range []string{"", "01", "-1", "18446744073709551616"} {
		if err := eval("7", bad); !errors.Is(err, fence.ErrMalformedSequence) {
			t.Errorf("seq %q: err = %v, want malformed sequence", bad, err)
		}
	}
	if n, err := rdb.Exists(ctx, key, MarkKey(key)).Result(); err != nil || n != 0 {
		t.Fatalf("refused writes left %d keys (%v)", n, err)
	}
}

func TestHelpersAndReplies(t *testing.T) {
	rdb := testClient(t)
	ctx := context.Background()
	scope := uniqueScope(t)
	user, counter, old := scope+":user", scope+":n", scope+":old"
	if err := rdb.Set(ctx, old, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	replies, err := Exec(ctx, rdb, scope, 3,
		HSet(user, "name", "ada", "role", "admin"),
		Cmd{Name: "INCRBY", Keys: []string{counter}, Args: []any{5}},
		Del(old, scope+":absent"),
		Set(scope, "v"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if want := []any{int64(2), int64(5), int64(1), "OK"}; !slices.Equal(replies, want) {
		t.Fatalf("replies = %#v, want %#v", replies, want)
	}
	h, err := rdb.HGetAll(ctx, user).Result()
	if err != nil || h["name"] != "ada" || h["role"] != "admin" {
		t.Fatalf("hash = %v (%v)", h, err)
	}
	if n, _ := rdb.Exists(ctx, old).Result(); n != 0 {
		t.Fatal("Del did not delete")
	}
	// A stale call runs none of its commands.
	if _, err := Exec(ctx, rdb, scope, 2, Cmd{Name: "INCRBY", Keys: []string{counter}, Args: []any{5}}); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("stale INCRBY: %v", err)
	}
	if v := get(t, rdb, counter); v != "5" {
		t.Fatalf("counter = %q after a stale INCRBY", v)
	}
	// Advance moves the mark alone.
	if err := Advance(ctx, rdb, scope, 4, 0); err != nil {
		t.Fatal(err)
	}
	if err := Advance(ctx, rdb, scope, 4, 0); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("Advance replay: %v", err)
	}
}

func TestBadCommandsRefusedBeforeSending(t *testing.T) {
	rdb := testClient(t)
	ctx := context.Background()
	scope := uniqueScope(t)
	for _, c := range []Cmd{
		{Name: "SET", Args: []any{"v"}},
		{Keys: []string{scope}},
		{Name: "SET", Keys: []string{""}, Args: []any{"v"}},
		Set(MarkKey(scope), "0"),
		Del(scope, MarkKey("other")),
	} {
		if _, err := Exec(ctx, rdb, scope, 1, c); !errors.Is(err, ErrBadCommand) {
			t.Errorf("%+v: err = %v", c, err)
		}
	}
	if m := mustHighWater(t, rdb, scope); m != (fence.Mark{}) {
		t.Fatalf("mark = %+v", m)
	}
}

// TestFailedCommandChangesNothing has the second of three commands fail in
// Redis (HSET on a string): the first one's write is undone, its key's TTL
// kept, a key it created removed, and the mark stays, so the same token can
// write again.
func TestFailedCommandChangesNothing(t *testing.T) {
	rdb := testClient(t)
	ctx := context.Background()
	scope := uniqueScope(t)
	kept, created, str := scope+":kept", scope+":created", scope+":string"
	if err := put(ctx, rdb, scope, 2, 0, "two"); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, kept, "before", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, str, "a string", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := Exec(ctx, rdb, scope, 3,
		Set(kept, "after"), Set(created, "new"), HSet(str, "f", "v"), Set(scope, "three"))
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Index != 2 || ce.Name != "HSET" {
		t.Fatalf("err = %v, want HSET (command 2) failed", err)
	}
	t.Logf("refused: %v", err)
	if v, ttl := get(t, rdb, kept), rdb.TTL(ctx, kept).Val(); v != "before" || ttl < 59*time.Minute {
		t.Fatalf("kept = %q ttl %v, want before with its hour", v, ttl)
	}
	if n, _ := rdb.Exists(ctx, created).Result(); n != 0 {
		t.Fatal("a key the failed write created is still there")
	}
	if v := get(t, rdb, scope); v != "two" {
		t.Fatalf("value = %q", v)
	}
	if m := mustHighWater(t, rdb, scope); m != (fence.Mark{Token: 2}) {
		t.Fatalf("mark after a failed write = %+v, want 2", m)
	}
	if err := put(ctx, rdb, scope, 3, 0, "three"); err != nil {
		t.Fatalf("token 3 after its failed write: %v", err)
	}
}

func TestCorruptMarkRefuses(t *testing.T) {
	rdb := testClient(t)
	ctx := context.Background()
	scope := uniqueScope(t)
	if err := rdb.HSet(ctx, MarkKey(scope), "token", "07", "seq", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := put(ctx, rdb, scope, 9, 0, "nine"); !errors.Is(err, ErrCorruptMark) {
		t.Fatalf("write over a corrupt mark: %v", err)
	}
	if _, err := HighWater(ctx, rdb, scope); !errors.Is(err, ErrCorruptMark) {
		t.Fatalf("HighWater of a corrupt mark: %v", err)
	}
	if n, _ := rdb.Exists(ctx, scope).Result(); n != 0 {
		t.Fatal("value written over a corrupt mark")
	}
}

// TestRacingWritersGreatestWins has writers on their own connections race
// interleaved tokens: writer w sends w+1, w+1+W, w+1+2W, ... in order, each
// twice (the second a replay), so at every moment they compete with close
// tokens. Each admitted write also appends its token to a log in the same
// script, so the log is the order of admission: it must be strictly
// increasing (no older token after a newer one, no replay), and the value
// and the mark must be the greatest token's.
func TestRacingWritersGreatestWins(t *testing.T) {
	rdb := testClient(t)
	ctx := context.Background()
	scope := uniqueScope(t)
	log := scope + ":log"
	const writers, each = 12, 25
	const n = writers * each
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted int
	)
	for w := range writers {
		wg.Go(func() {
			for k := range each {
				token := uint64(k*writers + w + 1)
				for range 2 {
					_, err := Exec(ctx, rdb, scope, token,
						Set(scope, strconv.FormatUint(token, 10)),
						Cmd{Name: "RPUSH", Keys: []string{log}, Args: []any{token}})
					switch {
					case err == nil:
						mu.Lock()
						admitted++
						mu.Unlock()
					case !errors.Is(err, fence.ErrStaleToken):
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	got, err := rdb.LRange(ctx, log, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != admitted {
		t.Fatalf("%d writes admitted, %d in the log", admitted, len(got))
	}
	prev := uint64(0)
	for i, s := range got {
		tok, _ := strconv.ParseUint(s, 10, 64)
		if tok <= prev {
			t.Fatalf("admission %d: token %d after %d", i, tok, prev)
		}
		prev = tok
	}
	if v, m := get(t, rdb, scope), mustHighWater(t, rdb, scope); v != strconv.Itoa(n) || m != (fence.Mark{Token: n}) {
		t.Fatalf("value %q mark %+v, want %d", v, m, n)
	}
	t.Logf("%d writers, %d writes: %d admitted", writers, 2*n, admitted)
}

// TestMarkSurvivesServerCrash kills redis-server with SIGKILL (no shutdown
// save) through FENCER_TEST_REDIS_RESTART, starts it again, and checks the
// mark and the value are still there: appendfsync always has each admitted
// write on disk before its answer.
func TestMarkSurvivesServerCrash(t *testing.T) {
	rdb := testClient(t)
	restart := os.Getenv("FENCER_TEST_REDIS_RESTART")
	if restart == "" {
		requireRedis(t, "FENCER_TEST_REDIS_RESTART")
	}
	ctx := context.Background()
	scope := uniqueScope(t)
	if err := put(ctx, rdb, scope, 33, 0, "thirty-three"); err != nil {
		t.Fatal(err)
	}
	if err := put(ctx, rdb, scope, 34, 2, "thirty-four"); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if out, err := exec.Command("sh", "-c", restart).CombinedOutput(); err != nil {
		t.Fatalf("restart %q: %v\n%s", restart, err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for rdb.Ping(ctx).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("redis-server not answering after restart")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("server killed, restarted and reachable in %v", time.Since(start).Round(time.Millisecond))

	if m := mustHighWater(t, rdb, scope); m != (fence.Mark{Token: 34, Seq: 2}) {
		t.Fatalf("mark after crash = %+v, want 34/2", m)
	}
	if err := put(ctx, rdb, scope, 33, 0, "late"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("token 33 after crash: err = %v, want stale", err)
	}
	if err := put(ctx, rdb, scope, 34, 2, "replay"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("replay of 34/2 after crash: err = %v, want stale", err)
	}
	if v := get(t, rdb, scope); v != "thirty-four" {
		t.Fatalf("value after crash = %q", v)
	}
}

// TestPythonClientRunsTheSameScript keeps the Python client's copy of the
// script the same text, so both languages enforce one rule on one scope.
func TestPythonClientRunsTheSameScript(t *testing.T) {
	py, err := os.ReadFile("../../clients/python/fencer/redis_fence.lua")
	if err != nil {
		t.Fatal(err)
	}
	if string(py) != ScriptSource {
		t.Fatal("clients/python/fencer/redis_fence.lua differs from fence/redisfence/fence.lua: copy one over the other")
	}
}
