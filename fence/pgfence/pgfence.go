package pgfence

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencer-io/fencer/fence"
)

// Migration creates the table of high-water marks, one row per fence scope.
// It is idempotent. seq is 0 for writes that carry no sequence.
const Migration = `CREATE TABLE IF NOT EXISTS fencer_high_water (
	scope text   PRIMARY KEY,
	token bigint NOT NULL CHECK (token > 0),
	seq   bigint NOT NULL DEFAULT 0 CHECK (seq >= 0)
)`

// advanceSQL moves a scope's mark forward in one statement, or does nothing.
// The row comparison is fence.Mark.Admits: (token, seq) must be strictly
// greater, and since seq >= 0 an equal token without a sequence (seq 0) never
// is. A concurrent writer of the same scope waits on the row lock and, under
// READ COMMITTED, re-checks the WHERE against the committed row, so of two
// racing writers the older token always loses.
const advanceSQL = `INSERT INTO fencer_high_water AS hw (scope, token, seq) VALUES ($1, $2, $3)
ON CONFLICT (scope) DO UPDATE SET token = EXCLUDED.token, seq = EXCLUDED.seq
WHERE (hw.token, hw.seq) < (EXCLUDED.token, EXCLUDED.seq)
RETURNING token`

const highWaterSQL = `SELECT token, seq FROM fencer_high_water WHERE scope = $1`

// Errors specific to PostgreSQL. Refusals use the fence package's errors
// (fence.ErrMissingToken, fence.ErrStaleToken) so errors.Is works the same
// against either backend.
var (
	// ErrTokenRange means a token or sequence does not fit PostgreSQL's
	// signed bigint. fencer's tokens are uint64, but one above
	// math.MaxInt64 would wrap negative if cast and then compare as the
	// oldest token of all; it is refused instead.
	ErrTokenRange = errors.New("pgfence: token or sequence exceeds bigint (max 9223372036854775807)")

	// ErrNoRow means a fenced row update named a row that does not exist.
	ErrNoRow = errors.New("pgfence: no such row")
)

// Execer runs a statement; *pgxpool.Pool, *pgx.Conn and pgx.Tx all are one.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Querier runs statements and reads rows; *pgxpool.Pool, *pgx.Conn and
// pgx.Tx all are one.
type Querier interface {
	Execer
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Beginner starts a transaction; *pgxpool.Pool and *pgx.Conn are one.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Migrate applies Migration.
func Migrate(ctx context.Context, db Execer) error {
	if _, err := db.Exec(ctx, Migration); err != nil {
		return fmt.Errorf("pgfence: migrate: %w", err)
	}
	return nil
}

// Exec runs fn as a write fenced by token on scope; it is ExecSeq with no
// sequence.
func Exec(ctx context.Context, db Beginner, scope string, token uint64, fn func(pgx.Tx) error) error {
	return ExecSeq(ctx, db, scope, token, 0, fn)
}

// ExecSeq runs fn as a write fenced by (token, seq) on scope, in one
// transaction: Advance first, so the scope's row stays locked against other
// writers until commit, then fn. A stale write returns a *fence.StaleError
// without running fn; if fn fails, the transaction (mark included) is rolled
// back and fn's error returned.
func ExecSeq(ctx context.Context, db Beginner, scope string, token, seq uint64, fn func(pgx.Tx) error) error {
	if _, _, err := checkRange(scope, token, seq); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := Advance(ctx, tx, scope, token, seq); err != nil {
			return err
		}
		return fn(tx)
	})
}

// Advance moves scope's high-water mark to (token, seq) if that is newer,
// and otherwise returns a *fence.StaleError. It is one statement; run it
// inside the transaction that makes the guarded write, as ExecSeq does, or the
// mark and the data can disagree.
func Advance(ctx context.Context, db Querier, scope string, token, seq uint64) error {
	t, s, err := checkRange(scope, token, seq)
	if err != nil {
		return err
	}
	var got int64
	err = db.QueryRow(ctx, advanceSQL, scope, t, s).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		hw, err := HighWater(ctx, db, scope)
		if err != nil {
			return err
		}
		return &fence.StaleError{Key: scope, Token: token, Seq: seq, HighWater: hw.Token, HighSeq: hw.Seq}
	}
	if err != nil {
		return fmt.Errorf("pgfence: advance %q: %w", scope, err)
	}
	return nil
}

// HighWater returns scope's mark, the zero Mark if it has none.
func HighWater(ctx context.Context, db Querier, scope string) (fence.Mark, error) {
	var t, s int64
	err := db.QueryRow(ctx, highWaterSQL, scope).Scan(&t, &s)
	if errors.Is(err, pgx.ErrNoRows) {
		return fence.Mark{}, nil
	}
	if err != nil {
		return fence.Mark{}, fmt.Errorf("pgfence: high water %q: %w", scope, err)
	}
	return fence.Mark{Token: uint64(t), Seq: uint64(s)}, nil
}

// checkRange fails closed on token 0 and on values bigint cannot hold.
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
