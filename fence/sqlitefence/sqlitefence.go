package sqlitefence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/fencer-io/fencer/fence"
)

// Migration creates the table of high-water marks, one row per fence scope.
// It is idempotent. seq is 0 for writes that carry no sequence. STRICT
// keeps SQLite's type affinity from storing a token as text, which would
// compare wrongly against integers.
const Migration = `CREATE TABLE IF NOT EXISTS fencer_high_water (
	scope TEXT    PRIMARY KEY,
	token INTEGER NOT NULL CHECK (token > 0),
	seq   INTEGER NOT NULL DEFAULT 0 CHECK (seq >= 0)
) STRICT`

// advanceSQL moves a scope's mark forward in one statement, or does nothing
// (and returns no row). The row comparison is fence.Mark.Admits: (token, seq)
// must be strictly greater, and since seq >= 0 an equal token without a
// sequence (seq 0) never is.
const advanceSQL = `INSERT INTO fencer_high_water AS hw (scope, token, seq) VALUES (?1, ?2, ?3)
ON CONFLICT (scope) DO UPDATE SET token = excluded.token, seq = excluded.seq
WHERE (hw.token, hw.seq) < (excluded.token, excluded.seq)
RETURNING token`

const highWaterSQL = `SELECT token, seq FROM fencer_high_water WHERE scope = ?1`

// Errors specific to SQLite. Refusals use the fence package's errors
// (fence.ErrMissingToken, fence.ErrStaleToken) so errors.Is works the same
// against every backend.
var (
	// ErrTokenRange means a token or sequence does not fit SQLite's signed
	// 64-bit INTEGER; one above math.MaxInt64 would wrap negative and then
	// compare as the oldest token of all.
	ErrTokenRange = errors.New("sqlitefence: token or sequence exceeds INTEGER (max 9223372036854775807)")

	// ErrNoRow means a fenced row update named a row that does not exist.
	ErrNoRow = errors.New("sqlitefence: no such row")
)

// Execer runs a statement; *sql.DB, *sql.Conn and *sql.Tx all are one.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Querier runs statements and reads rows; *sql.DB, *sql.Conn and *sql.Tx
// all are one.
type Querier interface {
	Execer
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Beginner starts a transaction; *sql.DB and *sql.Conn are one.
type Beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// Open opens (creating it if needed) the SQLite file at path for fenced
// writes: WAL, synchronous=FULL (each commit fsynced), BEGIN IMMEDIATE for
// every transaction, and a busy timeout so that writers from other
// connections and processes wait for the write lock instead of failing.
func Open(path string) (*sql.DB, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		// The driver reads the DSN's options from the first '?'.
		return nil, fmt.Errorf("sqlitefence: open %q: the path must be non-empty, without '?' or '#'", path)
	}
	q := url.Values{}
	q.Set("_txlock", "immediate")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlitefence: open %s: %w", path, err)
	}
	if err := db.Ping(); err != nil {
		return nil, errors.Join(fmt.Errorf("sqlitefence: open %s: %w", path, err), db.Close())
	}
	return db, nil
}

// Migrate applies Migration.
func Migrate(ctx context.Context, db Execer) error {
	if _, err := db.ExecContext(ctx, Migration); err != nil {
		return fmt.Errorf("sqlitefence: migrate: %w", err)
	}
	return nil
}

// Exec runs fn as a write fenced by token on scope; it is ExecSeq with no
// sequence.
func Exec(ctx context.Context, db Beginner, scope string, token uint64, fn func(*sql.Tx) error) error {
	return ExecSeq(ctx, db, scope, token, 0, fn)
}

// ExecSeq runs fn as a write fenced by (token, seq) on scope, in one
// transaction: Advance first, so the transaction holds the database's write
// lock from its first statement to its commit, then fn. A stale write
// returns a *fence.StaleError without running fn; if fn fails, the
// transaction (mark included) is rolled back and fn's error returned.
func ExecSeq(ctx context.Context, db Beginner, scope string, token, seq uint64, fn func(*sql.Tx) error) error {
	if _, _, err := checkRange(scope, token, seq); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitefence: begin: %w", err)
	}
	if err := Advance(ctx, tx, scope, token, seq); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitefence: commit %q: %w", scope, err)
	}
	return nil
}

// ignoreDone drops the error of rolling back a transaction that is already
// over (fn committed or rolled it back itself).
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// Advance moves scope's high-water mark to (token, seq) if that is newer,
// and otherwise returns a *fence.StaleError. It is one statement; run it as
// the first statement of the transaction that makes the guarded write, as
// ExecSeq does, or the mark and the data can disagree.
func Advance(ctx context.Context, db Querier, scope string, token, seq uint64) error {
	t, s, err := checkRange(scope, token, seq)
	if err != nil {
		return err
	}
	var got int64
	err = db.QueryRowContext(ctx, advanceSQL, scope, t, s).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		hw, err := HighWater(ctx, db, scope)
		if err != nil {
			return err
		}
		return &fence.StaleError{Key: scope, Token: token, Seq: seq, HighWater: hw.Token, HighSeq: hw.Seq}
	}
	if err != nil {
		return fmt.Errorf("sqlitefence: advance %q: %w", scope, err)
	}
	return nil
}

// HighWater returns scope's mark, the zero Mark if it has none.
func HighWater(ctx context.Context, db Querier, scope string) (fence.Mark, error) {
	var t, s int64
	err := db.QueryRowContext(ctx, highWaterSQL, scope).Scan(&t, &s)
	if errors.Is(err, sql.ErrNoRows) {
		return fence.Mark{}, nil
	}
	if err != nil {
		return fence.Mark{}, fmt.Errorf("sqlitefence: high water %q: %w", scope, err)
	}
	return fence.Mark{Token: uint64(t), Seq: uint64(s)}, nil
}

// checkRange fails closed on token 0 and on values INTEGER cannot hold.
func checkRange(scope string, token, seq uint64) (int64, int64, error) {
	switch {
	case scope == "":
		return 0, 0, fence.ErrEmptyKey
	case token == 0:
		return 0, 0, fmt.Errorf("%w: token 0", fence.ErrMissingToken)
	case token > math.MaxInt64 || seq > math.MaxInt64:
		return 0, 0, fmt.Errorf("%w: token %d seq %d", ErrTokenRange, token, seq)
	}
	return int64(token), int64(seq), nil
}
