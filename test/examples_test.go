package test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencer-io/fencer/fence"
	"github.com/fencer-io/fencer/fence/pgfence"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// pgDSN returns the test database, skipping when there is none unless the
// run requires PostgreSQL (make test does).
func pgDSN(t *testing.T) string {
	dsn := os.Getenv("FENCER_TEST_PG_DSN")
	if dsn == "" {
		if os.Getenv("FENCER_REQUIRE_PG") == "1" {
			t.Fatal("FENCER_TEST_PG_DSN is not set but FENCER_REQUIRE_PG=1 (run scripts/ensure-postgres.sh)")
		}
		t.Skip("no PostgreSQL: set FENCER_TEST_PG_DSN (eval \"$(scripts/ensure-postgres.sh)\")")
	}
	return dsn
}

// The README's Go example works as it stands: it takes the lock and writes to
// PostgreSQL through the fence; a later run writes with a larger token, and
// the earlier token is then refused by PostgreSQL itself.
func TestReadmeGoExampleWritesThroughTheFence(t *testing.T) {
	dsn := pgDSN(t)
	c := tc.New(t, 3)
	bin := filepath.Join(t.TempDir(), "pgwriter")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/pgwriter").CombinedOutput(); err != nil {
		t.Fatalf("build example: %v\n%s", err, out)
	}
	ctx := context.Background()
	db, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.Exec(ctx, `DROP TABLE IF EXISTS report`)
	db.Exec(ctx, `DELETE FROM fencer_high_water WHERE scope = 'report'`)

	run := func(msg string) uint64 {
		cmd := exec.Command(bin, msg)
		cmd.Env = append(os.Environ(), "FENCER_ENDPOINTS="+strings.Join(endpoints(c), ","), "DATABASE_URL="+dsn)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("example: %v\n%s", err, out)
		}
		m := regexp.MustCompile(`with fencing token (\d+)`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("example output: %s", out)
		}
		token, _ := strconv.ParseUint(string(m[1]), 10, 64)
		return token
	}
	first := run("first")
	second := run("second")
	if second <= first {
		t.Fatalf("second run token %d not above %d", second, first)
	}
	var body string
	if err := db.QueryRow(ctx, `SELECT body FROM report WHERE id = 1`).Scan(&body); err != nil || body != "second" {
		t.Fatalf("row = %q, %v", body, err)
	}
	// The first writer, waking up late, is refused inside PostgreSQL.
	err = pgfence.Exec(ctx, db, "report", first, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE report SET body = 'stale' WHERE id = 1`)
		return err
	})
	if !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("stale write: %v", err)
	}
	if err := db.QueryRow(ctx, `SELECT body FROM report WHERE id = 1`).Scan(&body); err != nil || body != "second" {
		t.Fatalf("row after stale write = %q, %v", body, err)
	}
}

// The one-line `fencer exec` of docs/cli.md runs a migration under a lock, with the
// token in the command's environment, and frees the lock afterwards.
func TestReadmeExecMigration(t *testing.T) {
	dsn := pgDSN(t)
	if _, err := exec.LookPath("psql"); err != nil {
		t.Skip("psql not installed")
	}
	c := tc.New(t, 3)
	bin := tc.BuildFencer(t, t.TempDir())
	ctx := context.Background()
	db, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.Exec(ctx, `DROP TABLE IF EXISTS widgets`)
	cmd := exec.Command(bin, "exec", "db-migrate", "--ttl", "30s", "--",
		"sh", "-c", `psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -c "CREATE TABLE IF NOT EXISTS widgets (id int)" && echo "token=$FENCER_TOKEN"`)
	cmd.Env = append(os.Environ(), "FENCER_ENDPOINTS="+strings.Join(endpoints(c), ","), "DATABASE_URL="+dsn)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fencer exec: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`token=[1-9]\d*`).Match(out) {
		t.Fatalf("token not in the command's environment: %s", out)
	}
	var exists bool
	if err := db.QueryRow(ctx, `SELECT to_regclass('widgets') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		t.Fatalf("migration did not run: %v", err)
	}
	st, _ := c.WaitLeader(10*time.Second).Inst.Coord.Lock(ctx, "db-migrate", false)
	if st.Held {
		t.Fatal("lock still held after the command exited")
	}
}
