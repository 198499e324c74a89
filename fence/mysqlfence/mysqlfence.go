package mysqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/fencer-io/fencer/fence"
)

// Migration creates the table of high-water marks, one row per fence scope.
// It is idempotent. seq is 0 for writes that carry no sequence.
const Migration = `CREATE TABLE IF NOT EXISTS fencer_high_water (
	scope VARBINARY(1024)  NOT NULL PRIMARY KEY,
	token BIGINT UNSIGNED  NOT NULL,
	seq   BIGINT UNSIGNED  NOT NULL DEFAULT 0
) ENGINE=InnoDB`

// MaxScopeLen is the longest scope, in bytes, fencer_high_water holds.
const MaxScopeLen = 1024

// ensureMarkSQL makes sure scope has a row and locks it exclusively until
// the transaction ends. A new scope's row starts as the zero Mark, which
// admits every token, and is rolled back with a refused write. It is
// INSERT ... ON DUPLICATE KEY UPDATE rather than INSERT IGNORE or a
// SELECT ... FOR UPDATE that finds nothing followed by an INSERT: those take
// a shared lock on a row a racing writer inserted, and two writers that
// hold one and then both ask for the exclusive lock deadlock. ON DUPLICATE
// KEY UPDATE asks for the exclusive lock at once, so racing creators of a
// scope queue behind each other instead.
const ensureMarkSQL = `INSERT INTO fencer_high_water (scope, token, seq) VALUES (?, 0, 0)
ON DUPLICATE KEY UPDATE token = token`

// lockMarkSQL reads the mark with a locking read: the newest committed
// version, whatever snapshot the transaction had read before (see the
// package doc).
const lockMarkSQL = `SELECT token, seq FROM fencer_high_water WHERE scope = ? FOR UPDATE`

const (
	updateMarkSQL = `UPDATE fencer_high_water SET token = ?, seq = ? WHERE scope = ?`
	highWaterSQL  = `SELECT token, seq FROM fencer_high_water WHERE scope = ?`
)

// MySQL error numbers the decisions depend on.
const (
	errDupEntry = 1062 // ER_DUP_ENTRY: a racing writer created the row first
)

// createRetries bounds UpsertRow's update-then-insert loop: a row that keeps
// disappearing between a duplicate-key error and the next UPDATE is being
// deleted by someone, and that is an error to report, not to spin on.
const createRetries = 3

// Errors specific to MySQL. Refusals use the fence package's errors
// (fence.ErrMissingToken, fence.ErrStaleToken) so errors.Is works the same
// against every backend.
var (
	// ErrNoRow means a fenced row update named a row that does not exist.
	ErrNoRow = errors.New("mysqlfence: no such row")

	// ErrScopeTooLong means a scope is longer than MaxScopeLen bytes.
	// It is refused rather than truncated: two long scopes that share a
	// prefix would otherwise share a mark.
	ErrScopeTooLong = fmt.Errorf("mysqlfence: scope longer than %d bytes", MaxScopeLen)
)

// Querier runs statements and reads rows; *sql.DB, *sql.Conn and *sql.Tx
// all are one.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Beginner starts a transaction; *sql.DB and *sql.Conn are one.
type Beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// Migrate applies Migration.
func Migrate(ctx context.Context, db Querier) error {
	if _, err := db.ExecContext(ctx, Migration); err != nil {
		return fmt.Errorf("mysqlfence: migrate: %w", err)
	}
	return nil
}

// Exec runs fn as a write fenced by token on scope; it is ExecSeq with no
// sequence.
func Exec(ctx context.Context, db Beginner, scope string, token uint64, fn func(*sql.Tx) error) error {
	return ExecSeq(ctx, db, scope, token, 0, fn)
}

// txOptions is every fenced transaction's: READ COMMITTED whatever the
// server's default, for the reasons the package doc gives.
var txOptions = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// ExecSeq runs fn as a write fenced by (token, seq) on scope, in one READ
// COMMITTED transaction: Advance first, so the scope's row stays locked
// against other writers until commit, then fn. A stale write returns a
// *fence.StaleError without running fn; if fn fails, the transaction (mark
// included) is rolled back and fn's error returned. The write is accepted
// only once the commit has succeeded.
func ExecSeq(ctx context.Context, db Beginner, scope string, token, seq uint64, fn func(*sql.Tx) error) (err error) {
	if err := checkScope(scope, token); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, txOptions)
	if err != nil {
		return fmt.Errorf("mysqlfence: begin: %w", err)
	}
	defer func() {
		if err != nil {
			// The rollback's own error adds nothing: the write is refused
			// either way, and a lost connection rolls back by itself.
			_ = tx.Rollback()
		}
	}()
	if err := Advance(ctx, tx, scope, token, seq); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("mysqlfence: commit %q: %w", scope, err)
	}
	return nil
}

// Advance moves scope's high-water mark to (token, seq) if Mark.Admits it,
// and otherwise returns a *fence.StaleError. It takes a transaction, not a
// connection, because its lock is what makes it correct: the scope's row
// stays locked from the check until tx ends, so make the guarded writes in
// tx, as ExecSeq does, or the mark and the data can disagree.
func Advance(ctx context.Context, tx *sql.Tx, scope string, token, seq uint64) error {
	if err := checkScope(scope, token); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, ensureMarkSQL, scope); err != nil {
		return fmt.Errorf("mysqlfence: lock mark %q: %w", scope, err)
	}
	var hw fence.Mark
	if err := tx.QueryRowContext(ctx, lockMarkSQL, scope).Scan(&hw.Token, &hw.Seq); err != nil {
		return fmt.Errorf("mysqlfence: read mark %q: %w", scope, err)
	}
	if !hw.Admits(token, seq) {
		return &fence.StaleError{Key: scope, Token: token, Seq: seq, HighWater: hw.Token, HighSeq: hw.Seq}
	}
	if _, err := tx.ExecContext(ctx, updateMarkSQL, token, seq, scope); err != nil {
		return fmt.Errorf("mysqlfence: advance %q: %w", scope, err)
	}
	return nil
}

// HighWater returns scope's mark, the zero Mark if it has none.
func HighWater(ctx context.Context, db Querier, scope string) (fence.Mark, error) {
	var m fence.Mark
	err := db.QueryRowContext(ctx, highWaterSQL, scope).Scan(&m.Token, &m.Seq)
	if errors.Is(err, sql.ErrNoRows) {
		return fence.Mark{}, nil
	}
	if err != nil {
		return fence.Mark{}, fmt.Errorf("mysqlfence: high water %q: %w", scope, err)
	}
	return m, nil
}

// checkScope fails closed on token 0 and on scopes the table cannot hold.
func checkScope(scope string, token uint64) error {
	switch {
	case scope == "":
		return fence.ErrEmptyKey
	case len(scope) > MaxScopeLen:
		return fmt.Errorf("%w: %d bytes", ErrScopeTooLong, len(scope))
	case token == 0:
		return fmt.Errorf("%w: token 0", fence.ErrMissingToken)
	}
	return nil
}

func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errDupEntry
}
