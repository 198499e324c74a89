package pgfence

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencer-io/fencer/fence"
)

// These tests need a real PostgreSQL: eval "$(scripts/ensure-postgres.sh)".
// Without FENCER_TEST_PG_DSN they skip, unless FENCER_REQUIRE_PG=1 makes
// the absence a failure (CI must not pass by skipping).

const testSchema = `
CREATE TABLE IF NOT EXISTS pgfence_test_kv (k text PRIMARY KEY, v text NOT NULL);
CREATE TABLE IF NOT EXISTS pgfence_test_rows (
	id          text   PRIMARY KEY,
	v           text   NOT NULL,
	fence_token bigint NOT NULL DEFAULT 0
)`

func requirePG(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("FENCER_REQUIRE_PG") == "1" {
		t.Fatalf("%s is unset but FENCER_REQUIRE_PG=1; run: eval \"$(scripts/ensure-postgres.sh)\"", what)
	}
	t.Skipf("%s is unset; run: eval \"$(scripts/ensure-postgres.sh)\" (FENCER_REQUIRE_PG=1 makes this a failure)", what)
}

func newPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func testPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	dsn := os.Getenv("FENCER_TEST_PG_DSN")
	if dsn == "" {
		requirePG(t, "FENCER_TEST_PG_DSN")
	}
	pool := newPool(t, dsn)
	ctx := context.Background()
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("ping %s: %v", dsn, err)
	}
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, testSchema); err != nil {
		t.Fatal(err)
	}
	return pool
}

// uniqueScope keeps runs against the same database independent.
func uniqueScope(t *testing.T) string {
	return fmt.Sprintf("%s/%d", t.Name(), time.Now().UnixNano())
}

// putKV writes value under scope in pgfence_test_kv, fenced on scope.
func putKV(ctx context.Context, db Beginner, scope string, token, seq uint64, value string) error {
	return ExecSeq(ctx, db, scope, token, seq, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO pgfence_test_kv (k, v) VALUES ($1, $2)
			ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v`, scope, value)
		return err
	})
}

func getKV(t *testing.T, db Querier, scope string) string {
	t.Helper()
	var v string
	err := db.QueryRow(context.Background(), `SELECT v FROM pgfence_test_kv WHERE k = $1`, scope).Scan(&v)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	return v
}

func mustHighWater(t *testing.T, db Querier, scope string) fence.Mark {
	t.Helper()
	m, err := HighWater(context.Background(), db, scope)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLateOlderWriterLoses(t *testing.T) {
	pool := testPool(t)
	ctx := context.Background()
	scope := uniqueScope(t)

	if err := putKV(ctx, pool, scope, 6, 0, "six"); err != nil {
		t.Fatal(err)
	}
	err := putKV(ctx, pool, scope, 5, 0, "five")
	var se *fence.StaleError
	if !errors.As(err, &se) || !errors.Is(err, fence.ErrStaleToken) || se.HighWater != 6 || se.Token != 5 {
		t.Fatalf("token 5 after 6: err = %v", err)
	}
	if got := getKV(t, pool, scope); got != "six" {
		t.Fatalf("value = %q, want six", got)
	}
	if err := putKV(ctx, pool, scope, 6, 0, "six again"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("replay of 6: err = %v", err)
	}
	if m := mustHighWater(t, pool, scope); m != (fence.Mark{Token: 6}) {
		t.Fatalf("mark = %+v", m)
	}
}

// TestOlderWriterQueuedBehindNewer has writer 5 arrive while writer 6's
// transaction is still open: 5 must wait on the scope's row lock and, once 6
// commits, be refused rather than overwrite 6's value.
func TestOlderWriterQueuedBehindNewer(t *testing.T) {
	pool := testPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	scope := uniqueScope(t)
	if err := putKV(ctx, pool, scope, 1, 0, "one"); err != nil {
		t.Fatal(err)
	}

	release := make(chan struct{})
	newer := make(chan error, 1)
	go func() {
		newer <- ExecSeq(ctx, pool, scope, 6, 0, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `UPDATE pgfence_test_kv SET v = 'six' WHERE k = $1`, scope); err != nil {
				return err
			}
			<-release
			return nil
		})
	}()
	waitFor(t, "writer 6 to hold the scope", func() bool { return lockHeld(t, pool, scope) })

	older := make(chan error, 1)
	go func() { older <- putKV(ctx, pool, scope, 5, 0, "five") }()
	waitFor(t, "writer 5 to wait on the row lock", func() bool {
		return countWaiting(t, pool, `INSERT INTO fencer_high_water%`) == 1
	})
	close(release)

	if err := <-newer; err != nil {
		t.Fatalf("writer 6: %v", err)
	}
	if err := <-older; !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("writer 5: err = %v, want stale", err)
	}
	if got, m := getKV(t, pool, scope), mustHighWater(t, pool, scope); got != "six" || m.Token != 6 {
		t.Fatalf("value %q mark %+v, want six/6", got, m)
	}
}

// lockHeld reports whether some open transaction has already advanced scope
// (its row is locked, so a NOWAIT lock attempt fails).
func lockHeld(t *testing.T, pool *pgxpool.Pool, scope string) bool {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT 1 FROM fencer_high_water WHERE scope = $1 FOR UPDATE NOWAIT`, scope)
		return err
	})
	return err != nil
}

// countWaiting counts backends blocked on a lock while running a query
// matching pattern.
func countWaiting(t *testing.T, pool *pgxpool.Pool, pattern string) int {
	t.Helper()
	var n int
	err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`, pattern).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRacingWritersNewestWins(t *testing.T) {
	pool := testPool(t)
	ctx := context.Background()
	scope := uniqueScope(t)
	const n = 40
	var wg sync.WaitGroup
	for _, token := range rand.Perm(n) {
		wg.Go(func() {
			err := putKV(ctx, pool, scope, uint64(token+1), 0, fmt.Sprint(token+1))
			if err != nil && !errors.Is(err, fence.ErrStaleToken) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, m := getKV(t, pool, scope), mustHighWater(t, pool, scope); got != fmt.Sprint(n) || m.Token != n {
		t.Fatalf("value %q mark %+v, want %d", got, m, n)
	}
}

func TestSequence(t *testing.T) {
	pool := testPool(t)
	ctx := context.Background()
	scope := uniqueScope(t)
	steps := []struct {
		token, seq uint64
		ok         bool
	}{
		{5, 1, true}, {5, 2, true}, {5, 2, false}, {5, 1, false}, {5, 0, false},
		{4, 9, false}, {6, 0, true}, {6, 0, false}, {6, 1, true},
	}
	for i, st := range steps {
		err := putKV(ctx, pool, scope, st.token, st.seq, "v")
		if st.ok != (err == nil) || (!st.ok && !errors.Is(err, fence.ErrStaleToken)) {
			t.Fatalf("step %d (%d/%d): err = %v, want ok=%v", i, st.token, st.seq, err, st.ok)
		}
	}
	if m := mustHighWater(t, pool, scope); m != (fence.Mark{Token: 6, Seq: 1}) {
		t.Fatalf("mark = %+v", m)
	}
}

func TestMissingZeroAndOutOfRangeRefused(t *testing.T) {
	pool := testPool(t)
	ctx := context.Background()
	scope := uniqueScope(t)
	run := func(token, seq uint64) error {
		return ExecSeq(ctx, pool, scope, token, seq, func(pgx.Tx) error {
			t.Errorf("fn ran for token %d seq %d", token, seq)
			return nil
		})
	}
	if err := run(0, 0); !errors.Is(err, fence.ErrMissingToken) {
		t.Fatalf("token 0: %v", err)
	}
	if err := run(math.MaxInt64+1, 0); !errors.Is(err, ErrTokenRange) {
		t.Fatalf("token 2^63: %v", err)
	}
	if err := run(math.MaxUint64, 0); !errors.Is(err, ErrTokenRange) {
		t.Fatalf("token 2^64-1: %v", err)
	}
	if err := run(1, math.MaxInt64+1); !errors.Is(err, ErrTokenRange) {
		t.Fatalf("seq 2^63: %v", err)
	}
	if err := Advance(ctx, pool, scope, 0, 0); !errors.Is(err, fence.ErrMissingToken) {
		t.Fatalf("Advance token 0: %v", err)
	}
	if m := mustHighWater(t, pool, scope); m != (fence.Mark{}) {
		t.Fatalf("refused writes left mark %+v", m)
	}
	// The largest token that fits is accepted, and then nothing is newer.
	if err := putKV(ctx, pool, scope, math.MaxInt64, 0, "max"); err != nil {
		t.Fatal(err)
	}
	if err := putKV(ctx, pool, scope, math.MaxInt64, 0, "max"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("replay of max: %v", err)
	}
}

func TestFnErrorRollsBackMark(t *testing.T) {
	pool := testPool(t)
	ctx := context.Background()
	scope := uniqueScope(t)
	if err := putKV(ctx, pool, scope, 3, 0, "three"); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := ExecSeq(ctx, pool, scope, 9, 0, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE pgfence_test_kv SET v = 'nine' WHERE k = $1`, scope); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if got, m := getKV(t, pool, scope), mustHighWater(t, pool, scope); got != "three" || m.Token != 3 {
		t.Fatalf("after fn error: value %q mark %+v", got, m)
	}
}

func TestRowFence(t *testing.T) {
	pool := testPool(t)
	ctx := context.Background()
	id := uniqueScope(t)
	row := func(v string) Row {
		return Row{Table: "pgfence_test_rows", ID: id, Set: map[string]any{"v": v}}
	}
	if err := UpdateRow(ctx, pool, row("x"), 1); !errors.Is(err, ErrNoRow) {
		t.Fatalf("UpdateRow on absent row: %v", err)
	}
	if err := UpsertRow(ctx, pool, row("six"), 6); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    func(context.Context, Querier, Row, uint64) error
	}{{"UpsertRow", UpsertRow}, {"UpdateRow", UpdateRow}} {
		for _, token := range []uint64{5, 6} {
			err := tc.f(ctx, pool, row("stale"), token)
			var se *fence.StaleError
			if !errors.As(err, &se) || se.HighWater != 6 {
				t.Fatalf("%s token %d: err = %v, want stale at 6", tc.name, token, err)
			}
		}
		if err := tc.f(ctx, pool, row("x"), 0); !errors.Is(err, fence.ErrMissingToken) {
			t.Fatalf("%s token 0: %v", tc.name, err)
		}
	}
	var v string
	var tok int64
	read := func() {
		t.Helper()
		err := pool.QueryRow(ctx, `SELECT v, fence_token FROM pgfence_test_rows WHERE id = $1`, id).Scan(&v, &tok)
		if err != nil {
			t.Fatal(err)
		}
	}
	read()
	if v != "six" || tok != 6 {
		t.Fatalf("row = %q/%d, want six/6", v, tok)
	}
	if err := UpdateRow(ctx, pool, row("seven"), 7); err != nil {
		t.Fatal(err)
	}
	read()
	if v != "seven" || tok != 7 {
		t.Fatalf("row = %q/%d, want seven/7", v, tok)
	}
	if err := UpdateRow(ctx, pool, Row{Table: "pgfence_test_rows", ID: id, Set: map[string]any{TokenColumn: 99}}, 8); err == nil {
		t.Fatal("Set naming fence_token accepted")
	}
}

// TestMarkSurvivesServerRestart restarts the PostgreSQL server with the
// command in FENCER_TEST_PG_RESTART and checks the mark is still there.
func TestMarkSurvivesServerRestart(t *testing.T) {
	pool := testPool(t)
	restart := os.Getenv("FENCER_TEST_PG_RESTART")
	if restart == "" {
		requirePG(t, "FENCER_TEST_PG_RESTART")
	}
	ctx := context.Background()
	scope := uniqueScope(t)
	if err := putKV(ctx, pool, scope, 34, 0, "thirty-four"); err != nil {
		t.Fatal(err)
	}
	pool.Close()

	start := time.Now()
	if out, err := exec.Command("sh", "-c", restart).CombinedOutput(); err != nil {
		t.Fatalf("restart %q: %v\n%s", restart, err, out)
	}
	fresh := newPool(t, os.Getenv("FENCER_TEST_PG_DSN"))
	waitFor(t, "PostgreSQL to accept connections after restart", func() bool {
		return fresh.Ping(ctx) == nil
	})
	t.Logf("server restarted and reachable in %v", time.Since(start).Round(time.Millisecond))

	if m := mustHighWater(t, fresh, scope); m != (fence.Mark{Token: 34}) {
		t.Fatalf("mark after restart = %+v, want 34", m)
	}
	if err := putKV(ctx, fresh, scope, 33, 0, "thirty-three"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("token 33 after restart: err = %v, want stale", err)
	}
	if got := getKV(t, fresh, scope); got != "thirty-four" {
		t.Fatalf("value after restart = %q", got)
	}
}
