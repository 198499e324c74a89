package mysqlfence

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
// must be declared "fence_token BIGINT UNSIGNED NOT NULL DEFAULT 0": a NULL
// would make every comparison unknown and the row unwritable, and a signed
// column cannot hold fencer's largest tokens (a strict-mode server refuses
// them; that fails closed, but refuses a current holder).
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
//	UPDATE t SET c1 = ?, ..., fence_token = ? WHERE id = ? AND fence_token < ?
//
// Zero rows affected means stale (a *fence.StaleError) or, if the row does
// not exist, ErrNoRow. The decision is the UPDATE's alone; the follow-up
// read only explains it. Because the UPDATE always changes fence_token, a
// row it matched is a row it changed, so the count means the same with or
// without the DSN's clientFoundRows.
func UpdateRow(ctx context.Context, db Querier, row Row, token uint64) error {
	if err := checkRow(row, token); err != nil {
		return err
	}
	ok, err := updateRow(ctx, db, row, token)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	return explainRefusal(ctx, db, row, token)
}

// UpsertRow inserts row with fence_token = token or, if a row with its key
// exists, updates it only when the stored fence_token is lower. IDColumn
// must be the table's primary key or have a unique index.
//
// It is UpdateRow's UPDATE first; if that matched nothing and the row does
// not exist, an INSERT, which the unique key refuses (duplicate key) if a
// racing writer created the row in between, and then the UPDATE again.
// Every accepted write is accepted by one statement that compares and
// writes the row atomically. MySQL's INSERT ... ON DUPLICATE KEY UPDATE is
// not used because its rows-affected count (0 for "unchanged", 1 for
// "inserted") becomes 1 for both under clientFoundRows, which would turn a
// refusal into an acceptance.
func UpsertRow(ctx context.Context, db Querier, row Row, token uint64) error {
	if err := checkRow(row, token); err != nil {
		return err
	}
	for range createRetries {
		ok, err := updateRow(ctx, db, row, token)
		if err != nil || ok {
			return err
		}
		// Why the UPDATE matched nothing: a mark at or above token (marks
		// only grow, so the write is stale for good), a row a racing writer
		// created since with a lower one (try the UPDATE again), or no row.
		hw, found, err := rowToken(ctx, db, row)
		switch {
		case err != nil:
			return err
		case found && hw >= token:
			return &fence.StaleError{Key: rowScope(row), Token: token, HighWater: hw}
		case found:
			continue
		}
		err = insertRow(ctx, db, row, token)
		if err == nil || !isDuplicate(err) {
			return err
		}
	}
	return fmt.Errorf("mysqlfence: row %s was created and removed %d times during one write", rowScope(row), createRetries)
}

func updateRow(ctx context.Context, db Querier, row Row, token uint64) (bool, error) {
	cols := sortedColumns(row.Set)
	args := make([]any, 0, len(cols)+3)
	sets := make([]string, 0, len(cols)+1)
	for _, c := range cols {
		args = append(args, row.Set[c])
		sets = append(sets, ident(c)+" = ?")
	}
	sets = append(sets, TokenColumn+" = ?")
	args = append(args, token, row.ID, token)
	q := fmt.Sprintf("UPDATE %s SET %s WHERE %s = ? AND %s < ?",
		ident(row.Table), strings.Join(sets, ", "), ident(idColumn(row)), TokenColumn)
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return false, fmt.Errorf("mysqlfence: update %s: %w", row.Table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("mysqlfence: update %s: %w", row.Table, err)
	}
	return n == 1, nil
}

func insertRow(ctx context.Context, db Querier, row Row, token uint64) error {
	cols := sortedColumns(row.Set)
	names := []string{ident(idColumn(row))}
	args := []any{row.ID}
	for _, c := range cols {
		names = append(names, ident(c))
		args = append(args, row.Set[c])
	}
	names = append(names, TokenColumn)
	args = append(args, token)
	q := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", ident(row.Table),
		strings.Join(names, ", "), strings.TrimSuffix(strings.Repeat("?, ", len(args)), ", "))
	_, err := db.ExecContext(ctx, q, args...)
	if err != nil && !isDuplicate(err) {
		return fmt.Errorf("mysqlfence: insert %s: %w", row.Table, err)
	}
	return err
}

func checkRow(row Row, token uint64) error {
	if row.Table == "" {
		return errors.New("mysqlfence: row has no table")
	}
	if _, ok := row.Set[TokenColumn]; ok {
		return fmt.Errorf("mysqlfence: Set must not name %s", TokenColumn)
	}
	if token == 0 {
		return fmt.Errorf("%w: token 0", fence.ErrMissingToken)
	}
	return nil
}

// explainRefusal turns "zero rows affected" into ErrNoRow or a StaleError.
func explainRefusal(ctx context.Context, db Querier, row Row, token uint64) error {
	hw, found, err := rowToken(ctx, db, row)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: %s", ErrNoRow, rowScope(row))
	}
	return &fence.StaleError{Key: rowScope(row), Token: token, HighWater: hw}
}

func rowToken(ctx context.Context, db Querier, row Row) (uint64, bool, error) {
	var hw uint64
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s = ?", TokenColumn, ident(row.Table), ident(idColumn(row)))
	err := db.QueryRowContext(ctx, q, row.ID).Scan(&hw)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("mysqlfence: read %s: %w", TokenColumn, err)
	}
	return hw, true, nil
}

func rowScope(row Row) string { return fmt.Sprintf("%s/%v", row.Table, row.ID) }

func idColumn(row Row) string {
	if row.IDColumn == "" {
		return "id"
	}
	return row.IDColumn
}

// ident quotes name as a MySQL identifier: in backticks, a backtick doubled.
func ident(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

// sortedColumns orders columns so the same Row always yields the same SQL.
func sortedColumns(set map[string]any) []string {
	return slices.Sorted(maps.Keys(set))
}
