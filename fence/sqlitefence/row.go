package sqlitefence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fencer-io/fencer/fence"
)

// TokenColumn is the column a row-fenced table keeps its row's token in. It
// must be declared "fence_token INTEGER NOT NULL DEFAULT 0": a NULL would
// make every comparison unknown and the row unwritable.
const TokenColumn = "fence_token"

// Row names one row of a row-fenced table and the columns to set.
type Row struct {
	Table    string         // table name, quoted as an identifier
	IDColumn string         // key column; "" means "id"
	ID       any            // key value
	Set      map[string]any // column -> new value; TokenColumn is set for you
}

// UpdateRow sets row's columns and its fence_token to token in one UPDATE
// that applies only when the stored fence_token is lower:
//
//	UPDATE t SET c1 = ?1, ..., fence_token = ?n WHERE id = ?k AND fence_token < ?n
//
// Zero rows updated means stale (a *fence.StaleError) or, if the row does
// not exist, ErrNoRow. The decision is the UPDATE's alone; the follow-up
// read only explains it.
func UpdateRow(ctx context.Context, db Querier, row Row, token uint64) error {
	t, _, err := checkRow(row, token)
	if err != nil {
		return err
	}
	cols := sortedColumns(row.Set)
	args := make([]any, 0, len(cols)+2)
	sets := make([]string, 0, len(cols)+1)
	for _, c := range cols {
		args = append(args, row.Set[c])
		sets = append(sets, fmt.Sprintf("%s = ?%d", ident(c), len(args)))
	}
	args = append(args, t, row.ID)
	tok, id := len(args)-1, len(args)
	sets = append(sets, fmt.Sprintf("%s = ?%d", TokenColumn, tok))
	query := fmt.Sprintf("UPDATE %s SET %s WHERE %s = ?%d AND %s < ?%d",
		ident(row.Table), strings.Join(sets, ", "), ident(idColumn(row)), id, TokenColumn, tok)
	return applied(ctx, db, row, token, "update", query, args)
}

// UpsertRow inserts row with fence_token = token, or, if a row with its key
// exists, updates it only when the stored fence_token is lower, in one
// INSERT ... ON CONFLICT statement. IDColumn must be the primary key or have
// a unique constraint.
func UpsertRow(ctx context.Context, db Querier, row Row, token uint64) error {
	t, _, err := checkRow(row, token)
	if err != nil {
		return err
	}
	cols := sortedColumns(row.Set)
	names := []string{ident(idColumn(row))}
	args := []any{row.ID}
	var sets []string
	for _, c := range cols {
		args = append(args, row.Set[c])
		names = append(names, ident(c))
		sets = append(sets, fmt.Sprintf("%s = excluded.%s", ident(c), ident(c)))
	}
	args = append(args, t)
	names = append(names, TokenColumn)
	sets = append(sets, fmt.Sprintf("%s = excluded.%s", TokenColumn, TokenColumn))
	params := make([]string, len(args))
	for i := range args {
		params[i] = fmt.Sprintf("?%d", i+1)
	}
	query := fmt.Sprintf("INSERT INTO %s AS cur (%s) VALUES (%s) ON CONFLICT (%s) DO UPDATE SET %s WHERE cur.%s < excluded.%s",
		ident(row.Table), strings.Join(names, ", "), strings.Join(params, ", "),
		ident(idColumn(row)), strings.Join(sets, ", "), TokenColumn, TokenColumn)
	return applied(ctx, db, row, token, "upsert", query, args)
}

// applied runs a row statement and turns "zero rows changed" into its reason.
func applied(ctx context.Context, db Querier, row Row, token uint64, what, query string, args []any) error {
	res, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("sqlitefence: %s %s: %w", what, row.Table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlitefence: %s %s: %w", what, row.Table, err)
	}
	if n == 1 {
		return nil
	}
	return explainRefusal(ctx, db, row, token)
}

func checkRow(row Row, token uint64) (int64, int64, error) {
	if row.Table == "" {
		return 0, 0, errors.New("sqlitefence: row has no table")
	}
	if _, ok := row.Set[TokenColumn]; ok {
		return 0, 0, fmt.Errorf("sqlitefence: Set must not name %s", TokenColumn)
	}
	return checkRange(rowScope(row), token, 0)
}

// explainRefusal turns "zero rows affected" into ErrNoRow or a StaleError.
func explainRefusal(ctx context.Context, db Querier, row Row, token uint64) error {
	var hw int64
	query := fmt.Sprintf("SELECT %s FROM %s WHERE %s = ?1", TokenColumn, ident(row.Table), ident(idColumn(row)))
	err := db.QueryRowContext(ctx, query, row.ID).Scan(&hw)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %s", ErrNoRow, rowScope(row))
	}
	if err != nil {
		return fmt.Errorf("sqlitefence: read %s: %w", TokenColumn, err)
	}
	return &fence.StaleError{Key: rowScope(row), Token: token, HighWater: uint64(hw)}
}

func rowScope(row Row) string { return fmt.Sprintf("%s/%v", row.Table, row.ID) }

func idColumn(row Row) string {
	if row.IDColumn == "" {
		return "id"
	}
	return row.IDColumn
}

// ident quotes an identifier for SQLite: in double quotes, any inside
// doubled.
func ident(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// sortedColumns orders columns so the same Row always yields the same SQL.
func sortedColumns(set map[string]any) []string {
	return slices.Sorted(maps.Keys(set))
}
