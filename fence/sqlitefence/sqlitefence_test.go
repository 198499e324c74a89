package sqlitefence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/fencer-io/fencer/fence"
)

// These tests run against real SQLite files in temporary directories, from
// several connections and, for the racing and crash tests, several
// processes: the test binary itself, started again as a writer (TestMain).

const testSchema = `
CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS admitted (n INTEGER PRIMARY KEY AUTOINCREMENT, token INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS rows (
	id          TEXT    PRIMARY KEY,
	v           TEXT    NOT NULL,
	fence_token INTEGER NOT NULL DEFAULT 0
)`

// Environment of a writer process (see TestMain and writerMain).
const (
	envWriterDB    = "SQLITEFENCE_TEST_WRITER_DB"
	envWriterFirst = "SQLITEFENCE_TEST_WRITER_FIRST" // first writer index in the process
	envWriterCrash = "SQLITEFENCE_TEST_WRITER_CRASH" // token to commit, then SIGKILL self
)

func TestMain(m *testing.M) {
	if path := os.Getenv(envWriterDB); path != "" {
		if err := writerMain(path); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	if err := Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, testSchema); err != nil {
		t.Fatal(err)
	}
	return db
}

func testDB(t *testing.T) *sql.DB {
	return openDB(t, filepath.Join(t.TempDir(), "fenced.db"))
}

// putKV writes value under scope in kv, fenced on scope, and logs the token
// in admitted, in the same transaction.
func putKV(ctx context.Context, db Beginner, scope string, token, seq uint64, value string) error {
	return ExecSeq(ctx, db, scope, token, seq, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO kv (k, v) VALUES (?1, ?2)
			ON CONFLICT (k) DO UPDATE SET v = excluded.v`, scope, value); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO admitted (token) VALUES (?1)`, int64(token))
		return err
	})
}

func getKV(t *testing.T, db Querier, scope string) string {
	t.Helper()
	var v string
	err := db.QueryRowContext(context.Background(), `SELECT v FROM kv WHERE k = ?1`, scope).Scan(&v)
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

func TestOpenIsDurable(t *testing.T) {
	db := testDB(t)
	var mode string
	var sync int
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`PRAGMA synchronous`).Scan(&sync); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || sync != 2 {
		t.Fatalf("journal_mode %q synchronous %d, want wal and 2 (FULL)", mode, sync)
	}
	for _, bad := range []string{"", "a?b", "a#b"} {
		if _, err := Open(bad); err == nil {
			t.Errorf("Open(%q) accepted", bad)
		}
	}
}

func TestLateOlderWriterLoses(t *testing.T) {
	db := testDB(t)
	ctx := context.Background()
	const scope = "report"
	if err := putKV(ctx, db, scope, 6, 0, "six"); err != nil {
		t.Fatal(err)
	}
	err := putKV(ctx, db, scope, 5, 0, "five")
	var se *fence.StaleError
	if !errors.As(err, &se) || !errors.Is(err, fence.ErrStaleToken) || se.HighWater != 6 || se.Token != 5 {
		t.Fatalf("token 5 after 6: err = %v", err)
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

func TestSequence(t *testing.T) {
	db := testDB(t)
	ctx := context.Background()
	const scope = "seq"
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

func TestMissingZeroAndOutOfRangeRefused(t *testing.T) {
	db := testDB(t)
	ctx := context.Background()
	const scope = "range"
	run := func(token, seq uint64) error {
		return ExecSeq(ctx, db, scope, token, seq, func(*sql.Tx) error {
			t.Errorf("fn ran for token %d seq %d", token, seq)
			return nil
		})
	}
	if err := run(0, 0); !errors.Is(err, fence.ErrMissingToken) || fence.Code(err) != "missing_token" {
		t.Fatalf("token 0: %v", err)
	}
	if err := ExecSeq(ctx, db, "", 1, 0, nil); !errors.Is(err, fence.ErrEmptyKey) {
		t.Fatalf("empty scope: %v", err)
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
	if err := Advance(ctx, db, scope, 0, 0); !errors.Is(err, fence.ErrMissingToken) {
		t.Fatalf("Advance token 0: %v", err)
	}
	if m := mustHighWater(t, db, scope); m != (fence.Mark{}) {
		t.Fatalf("refused writes left mark %+v", m)
	}
	if err := putKV(ctx, db, scope, math.MaxInt64, 0, "max"); err != nil {
		t.Fatal(err)
	}
	if err := putKV(ctx, db, scope, math.MaxInt64, 0, "max"); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("replay of max: %v", err)
	}
}

func TestFnErrorRollsBackMark(t *testing.T) {
	db := testDB(t)
	ctx := context.Background()
	const scope = "rollback"
	if err := putKV(ctx, db, scope, 3, 0, "three"); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := ExecSeq(ctx, db, scope, 9, 0, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE kv SET v = 'nine' WHERE k = ?1`, scope); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if got, m := getKV(t, db, scope), mustHighWater(t, db, scope); got != "three" || m.Token != 3 {
		t.Fatalf("after fn error: value %q mark %+v", got, m)
	}
	if err := putKV(ctx, db, scope, 9, 0, "nine"); err != nil {
		t.Fatalf("token 9 after its failed write: %v", err)
	}
}

func TestRowFence(t *testing.T) {
	db := testDB(t)
	ctx := context.Background()
	const id = "r1"
	row := func(v string) Row {
		return Row{Table: "rows", ID: id, Set: map[string]any{"v": v}}
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
		if err := tc.f(ctx, db, row("x"), math.MaxInt64+1); !errors.Is(err, ErrTokenRange) {
			t.Fatalf("%s token 2^63: %v", tc.name, err)
		}
	}
	var v string
	var tok int64
	read := func() {
		t.Helper()
		if err := db.QueryRowContext(ctx, `SELECT v, fence_token FROM rows WHERE id = ?1`, id).Scan(&v, &tok); err != nil {
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
	if err := UpdateRow(ctx, db, Row{Table: "rows", ID: id, Set: map[string]any{TokenColumn: 99}}, 8); err == nil {
		t.Fatal("Set naming fence_token accepted")
	}
}

// Racing writers: writers*processes writers, each on its own connection
// (its own *sql.DB), writer w sending the interleaved tokens w+1, w+1+W, ...
// in order, each twice (the second a replay).
const (
	racingProcs   = 3
	racingWriters = 3 // per process
	racingEach    = 15
)

// writerMain is a writer process: racingWriters writers from
// envWriterFirst, or, with envWriterCrash, one write then SIGKILL.
func writerMain(path string) error {
	ctx := context.Background()
	if crash := os.Getenv(envWriterCrash); crash != "" {
		token, err := strconv.ParseUint(crash, 10, 64)
		if err != nil {
			return err
		}
		db, err := Open(path)
		if err != nil {
			return err
		}
		if err := putKV(ctx, db, "crash", token, 0, crash); err != nil {
			return err
		}
		// No Close, no checkpoint: the commit must already be durable.
		return syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	first, err := strconv.Atoi(os.Getenv(envWriterFirst))
	if err != nil {
		return err
	}
	// The parent's go: one byte on stdin once every process has started,
	// so that the processes race rather than run one after another.
	if _, err := io.ReadFull(os.Stdin, make([]byte, 1)); err != nil {
		return fmt.Errorf("waiting for the start: %w", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, racingWriters)
	for w := first; w < first+racingWriters; w++ {
		wg.Go(func() {
			db, err := Open(path)
			if err != nil {
				errs <- err
				return
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			for k := range racingEach {
				token := uint64(k*racingProcs*racingWriters + w + 1)
				for range 2 {
					err := putKV(ctx, db, "race", token, 0, strconv.FormatUint(token, 10))
					if err != nil && !errors.Is(err, fence.ErrStaleToken) {
						errs <- fmt.Errorf("writer %d token %d: %w", w, token, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// startWriter starts a writer process; its stdin is the returned writer.
func startWriter(t *testing.T, path string, env ...string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{envWriterDB + "=" + path}, env...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdin
}

// TestRacingProcessesGreatestWins races writers in several processes on one
// file. admitted is written in each admitted write's transaction, so its
// AUTOINCREMENT order is the order of admission: it must be strictly
// increasing in token, and the value and mark the greatest token's.
func TestRacingProcessesGreatestWins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "race.db")
	db := openDB(t, path)
	var procs []*exec.Cmd
	var gates []io.WriteCloser
	for p := range racingProcs {
		cmd, gate := startWriter(t, path, fmt.Sprintf("%s=%d", envWriterFirst, p*racingWriters))
		procs, gates = append(procs, cmd), append(gates, gate)
	}
	for _, g := range gates {
		if _, err := g.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		g.Close()
	}
	for i, p := range procs {
		if err := p.Wait(); err != nil {
			t.Fatalf("writer process %d: %v", i, err)
		}
	}
	rows, err := db.Query(`SELECT token FROM admitted ORDER BY n`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var prev int64
	count := 0
	for rows.Next() {
		var tok int64
		if err := rows.Scan(&tok); err != nil {
			t.Fatal(err)
		}
		if tok <= prev {
			t.Fatalf("admission %d: token %d after %d", count, tok, prev)
		}
		prev, count = tok, count+1
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	const n = racingProcs * racingWriters * racingEach
	if v, m := getKV(t, db, "race"), mustHighWater(t, db, "race"); v != strconv.Itoa(n) || m != (fence.Mark{Token: n}) {
		t.Fatalf("value %q mark %+v, want %d", v, m, n)
	}
	t.Logf("%d processes x %d writers, %d writes: %d admitted", racingProcs, racingWriters, 2*n, count)
}

// TestMarkSurvivesWriterCrash has a writer process commit token 34 and kill
// itself with SIGKILL (no close, no WAL checkpoint); the file, opened again,
// still has the mark and refuses 33 and the replay.
func TestMarkSurvivesWriterCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crash.db")
	openDB(t, path).Close()
	cmd, _ := startWriter(t, path, envWriterCrash+"=34")
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("writer: %v, want killed by SIGKILL", err)
	}
	db := openDB(t, path)
	ctx := context.Background()
	if m := mustHighWater(t, db, "crash"); m != (fence.Mark{Token: 34}) {
		t.Fatalf("mark after crash = %+v, want 34", m)
	}
	for _, token := range []uint64{33, 34} {
		if err := putKV(ctx, db, "crash", token, 0, "late"); !errors.Is(err, fence.ErrStaleToken) {
			t.Fatalf("token %d after crash: %v, want stale", token, err)
		}
	}
	if got := getKV(t, db, "crash"); got != "34" {
		t.Fatalf("value after crash = %q", got)
	}
}
