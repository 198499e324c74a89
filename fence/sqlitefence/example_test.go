package sqlitefence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/fencer-io/fencer/fence"
	"github.com/fencer-io/fencer/fence/sqlitefence"
)

// Two holders of the lock "report" write through the fence; the one whose
// grant is older (token 6) arrives late and is refused by SQLite itself.
func ExampleExec() {
	dir, err := os.MkdirTemp("", "sqlitefence-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := sqlitefence.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := sqlitefence.Migrate(ctx, db); err != nil { // creates fencer_high_water
		log.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE report (id INTEGER PRIMARY KEY, body TEXT)`); err != nil {
		log.Fatal(err)
	}

	write := func(token uint64, body string) error {
		return sqlitefence.Exec(ctx, db, "report", token, func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO report (id, body) VALUES (1, ?1)
				ON CONFLICT (id) DO UPDATE SET body = excluded.body`, body)
			return err
		})
	}
	fmt.Println("token 7:", write(7, "from the newer holder"))
	err = write(6, "from a paused older holder")
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		fmt.Println("token 6: refused, last accepted", stale.HighWater)
	}
	var body string
	db.QueryRow(`SELECT body FROM report WHERE id = 1`).Scan(&body)
	fmt.Println("report:", body)
	// Output:
	// token 7: <nil>
	// token 6: refused, last accepted 7
	// report: from the newer holder
}
