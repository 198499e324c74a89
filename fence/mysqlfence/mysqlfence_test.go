package mysqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/fencer-io/fencer/fence"
)

// These tests need a real MariaDB or MySQL: scripts/with-mariadb.sh go test
// ./fence/mysqlfence/ starts one. Without FENCER_TEST_MYSQL_DSN they skip,
// unless FENCER_REQUIRE_MYSQL=1 makes the absence a failure (CI must not
// pass by skipping).

var testSchema = []string{
	`CREATE TABLE IF NOT EXISTS mysqlfence_test_kv (k VARBINARY(255) PRIMARY KEY, v TEXT NOT NULL) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS mysqlfence_test_rows (
		id          VARCHAR(255)    PRIMARY KEY,
		v           TEXT            NOT NULL,
		fence_token BIGINT UNSIGNED NOT NULL DEFAULT 0
	) ENGINE=InnoDB`,
}

func requireMySQL(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("FENCER_REQUIRE_MYSQL") == "1" {
		t.Fatalf("%s is unset but FENCER_REQUIRE_MYSQL=1; run the tests under scripts/with-mariadb.sh", what)
	}
	t.Skipf("%s is unset; run the tests under scripts/with-mariadb.sh (FENCER_REQUIRE_MYSQL=1 makes this a failure)", what)
}

func openDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func testDB(t *testing.T) *sql.DB {
	t.Helper()
	dsn := os.Getenv("FENCER_TEST_MYSQL_DSN")
	if dsn == "" {
		requireMySQL(t, "FENCER_TEST_MYSQL_DSN")
	}
	db := openDB(t, dsn)
	ctx := context.Background()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("ping %s: %v", dsn, err)
	}
	if err := Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	for _, q := range testSchema {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// uniqueScope keeps runs against the same database independent.
func uniqueScope(t *testing.T) string {
	return fmt.Sprintf("%s/%d", t.Name(), time.Now().UnixNano())
}

// putKV writes value under scope in mysqlfence_test_kv, fenced on scope.
func putKV(ctx context.Context, db Beginner, scope string, token, seq uint64, value string) error {
	return ExecSeq(ctx, db, scope, token, seq, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO mysqlfence_test_kv (k, v) VALUES (?, ?)
			ON DUPLICATE KEY UPDATE v = VALUES(v)`, scope, value)
		return err
	})
}

func getKV(t *testing.T, db Querier, scope string) string {
	t.Helper()
	var v string
	err := db.QueryRowContext(context.Background(), `SELECT v FROM mysqlfence_test_kv WHERE k = ?`, scope).Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
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
	db := testDB(t)
	ctx := context.Background()
	scope := uniqueScope(t)

	if err := putKV(ctx, db, scope, 6, 0, "six"); err != nil {
		t.Fatal(err)
	}
	err := putKV(ctx, db, scope, 5, 0, "five")
	var se *fence.StaleError
	if !errors.As(err, &se) || !errors.Is(err, fence.ErrStaleToken) || se.HighWater != 6 || se.Token != 5 {
		t.Fatalf("token 5 after 6: err = %v", err)
	}
	if fence.Code(err) != "stale_token" {
		t.Fatalf("code = %q", fence.Code(err))
	}
	if got := getKV(t, db, scope); got != "six" {
		t.Fatalf("value = %q, want six", got)
	}
	if err := putKV(ctx, db, scope, 6, 0, "six again"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("replay of 6: err = %v", err)
	}
	if m := mustHighWater(t, db, scope); m != (fence.Mark{Token: 6}) {
		t.Fatalf("mark = %+v", m)
	}
}

// TestRefusedWriteChangesNothing: a stale write does not run fn, and leaves
// the data, the mark and the table of marks as they were.
func TestRefusedWriteChangesNothing(t *testing.T) {
	db := testDB(t)
	ctx := context.Background()
	scope := uniqueScope(t)
	if err := putKV(ctx, db, scope, 8, 0, "eight"); err != nil {
		t.Fatal(err)
	}
	var marks int
	countMarks := func() int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM fencer_high_water`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	marks = countMarks()
	for _, token := range []uint64{1, 7, 8} {
		err := ExecSeq(ctx, db, scope, token, 0, func(tx *sql.Tx) error {
			t.Errorf("fn ran for stale token %d", token)
			_, err := tx.ExecContext(ctx, `UPDATE mysqlfence_test_kv SET v = 'stale' WHERE k = ?`, scope)
			return err
		})
		if !errors.Is(err, fence.ErrStaleToken) {
			t.Fatalf("token %d: err = %v", token, err)
		}
	}
	if err := ExecSeq(ctx, db, scope+"/new", 0, 0, func(*sql.Tx) error { return nil }); !errors.Is(err, fence.ErrMissingToken) {
		t.Fatalf("token 0 on a new scope: %v", err)
	}
	if got, m, n := getKV(t, db, scope), mustHighWater(t, db, scope), countMarks(); got != "eight" || m != (fence.Mark{Token: 8}) || n != marks {
		t.Fatalf("after refusals: value %q mark %+v marks %d (was %d)", got, m, n, marks)
	}
}

// TestOlderWriterQueuedBehindNewer has writer 5 arrive while writer 6's
// transaction is still open: 5 must wait on the scope's row lock and, once 6
// commits, be refused rather than overwrite 6's value.
func TestOlderWriterQueuedBehindNewer(t *testing.T) {
	db := testDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	scope := uniqueScope(t)
	if err := putKV(ctx, db, scope, 1, 0, "one"); err != nil {
		t.Fatal(err)
	}

	release := make(chan struct{})
	newer := make(chan error, 1)
	go func() {
		newer <- ExecSeq(ctx, db, scope, 6, 0, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `UPDATE mysqlfence_test_kv SET v = 'six' WHERE k = ?`, scope); err != nil {
				return err
			}
			<-release
			return nil
		})
	}()
	waitFor(t, "writer 6 to hold the scope", func() bool { return lockHeld(t, db, scope) })

	older := make(chan error, 1)
	go func() { older <- putKV(ctx, db, scope, 5, 0, "five") }()
	waitFor(t, "writer 5 to wait on the row lock", func() bool { return countWaiting(t, db, "INSERT INTO fencer_high_water%") == 1 })
	close(release)

	if err := <-newer; err != nil {
		t.Fatalf("writer 6: %v", err)
	}
	if err := <-older; !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("writer 5: err = %v, want stale", err)
	}
	if got, m := getKV(t, db, scope), mustHighWater(t, db, scope); got != "six" || m.Token != 6 {
		t.Fatalf("value %q mark %+v, want six/6", got, m)
	}
}

// TestAdvanceReadsPastSnapshot calls Advance in a caller's REPEATABLE READ
// transaction whose snapshot predates a newer writer's commit: the mark it
// compares with must be the committed one (7), not the snapshot's (5), or
// token 6 is admitted and the mark moves back.
func TestAdvanceReadsPastSnapshot(t *testing.T) {
	db := testDB(t)
	ctx := context.Background()
	scope := uniqueScope(t)
	if err := putKV(ctx, db, scope, 5, 0, "five"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if m := mustHighWater(t, tx, scope); m.Token != 5 { // takes the snapshot
		t.Fatalf("snapshot mark %+v", m)
	}
	if err := putKV(ctx, db, scope, 7, 0, "seven"); err != nil {
		t.Fatal(err)
	}
	if m := mustHighWater(t, tx, scope); m.Token != 5 {
		t.Fatalf("the snapshot moved: %+v; the test needs REPEATABLE READ", m)
	}
	err = Advance(ctx, tx, scope, 6, 0)
	var se *fence.StaleError
	if !errors.As(err, &se) || se.HighWater != 7 {
		t.Fatalf("Advance(6) in a snapshot older than 7: err = %v, want stale at 7", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if m := mustHighWater(t, db, scope); m.Token != 7 {
		t.Fatalf("mark = %+v, want 7", m)
	}
}

// lockHeld reports whether some open transaction has already locked scope's
// mark (a NOWAIT lock attempt fails).
func lockHeld(t *testing.T, db *sql.DB, scope string) bool {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, `SELECT 1 FROM fencer_high_water WHERE scope = ? FOR UPDATE NOWAIT`, scope)
	return err != nil
}

// countWaiting counts connections running a statement matching pattern.
// Used while the statement can only be waiting for a lock, it counts the
// waiters; information_schema.INNODB_TRX says "LOCK WAIT" exactly, but its
// answer took seconds to come here while a lock was waited for.
func countWaiting(t *testing.T, db *sql.DB, pattern string) int {
	t.Helper()
	var n int
	err := db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM information_schema.PROCESSLIST
		WHERE COMMAND IN ('Execute', 'Query') AND INFO LIKE ?`, pattern).Scan(&n)
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

// TestRacingWritersNewestWins: writers with interleaved tokens race on one
// scope, first on a scope with no mark yet (they race to create its row) and
// then on one that has it; exactly the greatest token's value and mark
// remain, and every other write is refused as stale, none fails otherwise.
func TestRacingWritersNewestWins(t *testing.T) {
	db := testDB(t)
	ctx := context.Background()
	const n = 40
	for round, base := range []uint64{0, n} {
		scope := uniqueScope(t)
		if base > 0 {
			if err := putKV(ctx, db, scope, base, 0, "base"); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var accepted []uint64
		for _, i := range rand.Perm(n) {
			token := base + uint64(i) + 1
			wg.Go(func() {
				err := putKV(ctx, db, scope, token, 0, fmt.Sprint(token))
				switch {
				case err == nil:
					mu.Lock()
					accepted = append(accepted, token)
					mu.Unlock()
				case !errors.Is(err, fence.ErrStaleToken):
					t.Errorf("round %d token %d: %v", round, token, err)
				}
			})
		}
		wg.Wait()
		want := base + n
		if got, m := getKV(t, db, scope), mustHighWater(t, db, scope); got != fmt.Sprint(want) || m.Token != want {
			t.Fatalf("round %d: value %q mark %+v, want %d", round, got, m, want)
		}
		mu.Lock()
		t.Logf("round %d: %d of %d writes accepted: %v", round, len(accepted), n, accepted)
		mu.Unlock()
	}
}

func TestSequence(t *testing.T) {
	db := testDB(t)
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
		err := putKV(ctx, db, scope, st.token, st.seq, "v")
		if st.ok != (err == nil) || (!st.ok && !errors.Is(err, fence.ErrStaleToken)) {
			t.Fatalf("step %d (%d/%d): err = %v, want ok=%v", i, st.token, st.seq, err, st.ok)
		}
	}
	if m := mustHighWater(t, db, scope); m != (fence.Mark{Token: 6, Seq: 1}) {
		t.Fatalf("mark = %+v", m)
	}
}

// TestMissingTokenAndFullRange: token 0 and bad scopes are refused before
// any statement runs; BIGINT UNSIGNED holds every uint64 token, so the
// largest is accepted and then nothing is newer.
func TestMissingTokenAndFullRange(t *testing.T) {
	db := testDB(t)
	ctx := context.Background()
	scope := uniqueScope(t)
	run := func(scope string, token uint64) error {
		return Exec(ctx, db, scope, token, func(*sql.Tx) error {
			t.Errorf("fn ran for scope %q token %d", scope, token)
			return nil
		})
	}
	if err := run(scope, 0); !errors.Is(err, fence.ErrMissingToken) || fence.Code(err) != "missing_token" {
		t.Fatalf("token 0: %v", err)
	}
	if err := run("", 1); !errors.Is(err, fence.ErrEmptyKey) {
		t.Fatalf("empty scope: %v", err)
	}
	if err := run(string(make([]byte, MaxScopeLen+1)), 1); !errors.Is(err, ErrScopeTooLong) {
		t.Fatalf("long scope: %v", err)
	}
	if m := mustHighWater(t, db, scope); m != (fence.Mark{}) {
		t.Fatalf("refused writes left mark %+v", m)
	}
	if err := putKV(ctx, db, scope, math.MaxInt64+1, 0, "2^63"); err != nil {
		t.Fatal(err)
	}
	if err := putKV(ctx, db, scope, math.MaxUint64, 0, "max"); err != nil {
		t.Fatal(err)
	}
	if err := putKV(ctx, db, scope, math.MaxUint64, 0, "max"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("replay of max: %v", err)
	}
	if m := mustHighWater(t, db, scope); m != (fence.Mark{Token: math.MaxUint64}) {
		t.Fatalf("mark = %+v", m)
	}
}

func TestFnErrorRollsBackMark(t *testing.T) {
	db := testDB(t)
	ctx := context.Background()
	for _, existing := range []bool{true, false} {
		scope := uniqueScope(t)
		want := fence.Mark{}
		if existing {
			if err := putKV(ctx, db, scope, 3, 0, "three"); err != nil {
				t.Fatal(err)
			}
			want = fence.Mark{Token: 3}
		}
		boom := errors.New("boom")
		err := ExecSeq(ctx, db, scope, 9, 0, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO mysqlfence_test_kv (k, v) VALUES (?, 'nine')
				ON DUPLICATE KEY UPDATE v = 'nine'`, scope); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
		if got, m := getKV(t, db, scope), mustHighWater(t, db, scope); got == "nine" || m != want {
			t.Fatalf("existing=%v, after fn error: value %q mark %+v, want mark %+v", existing, got, m, want)
		}
	}
}

func TestRowFence(t *testing.T) {
	db := testDB(t)
	ctx := context.Background()
	id := uniqueScope(t)
	row := func(v string) Row {
		return Row{Table: "mysqlfence_test_rows", ID: id, Set: map[string]any{"v": v}}
	}
	if err := UpdateRow(ctx, db, row("x"), 1); !errors.Is(err, ErrNoRow) {
		t.Fatalf("UpdateRow on absent row: %v", err)
	}
	if err := UpsertRow(ctx, db, row("six"), 6); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    func(context.Context, Querier, Row, uint64) error
	}{{"UpsertRow", UpsertRow}, {"UpdateRow", UpdateRow}} {
		for _, token := range []uint64{5, 6} {
			err := tc.f(ctx, db, row("stale"), token)
			var se *fence.StaleError
			if !errors.As(err, &se) || se.HighWater != 6 {
				t.Fatalf("%s token %d: err = %v, want stale at 6", tc.name, token, err)
			}
		}
		if err := tc.f(ctx, db, row("x"), 0); !errors.Is(err, fence.ErrMissingToken) {
			t.Fatalf("%s token 0: %v", tc.name, err)
		}
	}
	var v string
	var tok uint64
	read := func() {
		t.Helper()
		err := db.QueryRowContext(ctx, `SELECT v, fence_token FROM mysqlfence_test_rows WHERE id = ?`, id).Scan(&v, &tok)
		if err != nil {
			t.Fatal(err)
		}
	}
	read()
	if v != "six" || tok != 6 {
		t.Fatalf("row = %q/%d, want six/6", v, tok)
	}
	if err := UpdateRow(ctx, db, row("seven"), 7); err != nil {
		t.Fatal(err)
	}
	read()
	if v != "seven" || tok != 7 {
		t.Fatalf("row = %q/%d, want seven/7", v, tok)
	}
	// The same value again with a newer token is accepted: the UPDATE
	// changes fence_token, so it is counted as changed.
	if err := UpsertRow(ctx, db, row("seven"), math.MaxUint64); err != nil {
		t.Fatal(err)
	}
	read()
	if v != "seven" || tok != math.MaxUint64 {
		t.Fatalf("row = %q/%d, want seven/max", v, tok)
	}
	if err := UpdateRow(ctx, db, Row{Table: "mysqlfence_test_rows", ID: id, Set: map[string]any{TokenColumn: 99}}, 8); err == nil {
		t.Fatal("Set naming fence_token accepted")
	}
}

// TestRacingUpsertsNewestWins races UpsertRow writers with interleaved
// tokens on a row that does not exist yet, so that they also race to
// insert it.
func TestRacingUpsertsNewestWins(t *testing.T) {
	db := testDB(t)
	ctx := context.Background()
	id := uniqueScope(t)
	const n = 40
	var wg sync.WaitGroup
	for _, i := range rand.Perm(n) {
		token := uint64(i + 1)
		wg.Go(func() {
			err := UpsertRow(ctx, db, Row{Table: "mysqlfence_test_rows", ID: id, Set: map[string]any{"v": fmt.Sprint(token)}}, token)
			if err != nil && !errors.Is(err, fence.ErrStaleToken) {
				t.Errorf("token %d: %v", token, err)
			}
		})
	}
	wg.Wait()
	var v string
	var tok uint64
	if err := db.QueryRowContext(ctx, `SELECT v, fence_token FROM mysqlfence_test_rows WHERE id = ?`, id).Scan(&v, &tok); err != nil {
		t.Fatal(err)
	}
	if v != fmt.Sprint(n) || tok != n {
		t.Fatalf("row = %q/%d, want %d", v, tok, n)
	}
}

// TestMarkSurvivesServerRestart restarts the server with the command in
// FENCER_TEST_MYSQL_RESTART and checks the mark is still there.
func TestMarkSurvivesServerRestart(t *testing.T) {
	db := testDB(t)
	restart := os.Getenv("FENCER_TEST_MYSQL_RESTART")
	if restart == "" {
		requireMySQL(t, "FENCER_TEST_MYSQL_RESTART")
	}
	ctx := context.Background()
	scope := uniqueScope(t)
	if err := putKV(ctx, db, scope, 34, 0, "thirty-four"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	start := time.Now()
	if out, err := exec.Command("sh", "-c", restart).CombinedOutput(); err != nil {
		t.Fatalf("restart %q: %v\n%s", restart, err, out)
	}
	fresh := openDB(t, os.Getenv("FENCER_TEST_MYSQL_DSN"))
	waitFor(t, "MariaDB to accept connections after restart", func() bool { return fresh.PingContext(ctx) == nil })
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
