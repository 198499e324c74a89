// Command pgwriter is the README's example: it takes a fencer lock and
// writes to PostgreSQL through the fence, so that a writer that lost its
// lock (paused, partitioned) can never overwrite a newer holder's write.
//
//	FENCER_ENDPOINTS=127.0.0.1:7001 DATABASE_URL=postgres://… go run ./examples/pgwriter "hello"
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/fence/pgfence"
)

func main() {
	ctx := context.Background()
	fencer, err := client.New(strings.Split(os.Getenv("FENCER_ENDPOINTS"), ","))
	if err != nil {
		log.Fatal(err)
	}
	db, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := pgfence.Migrate(ctx, db); err != nil { // creates fencer_high_water
		log.Fatal(err)
	}
	if _, err := db.Exec(ctx, `CREATE TABLE IF NOT EXISTS report (id int PRIMARY KEY, body text, token bigint)`); err != nil {
		log.Fatal(err)
	}

	// Take the lock; the lease renews itself in the background.
	lease, err := fencer.Acquire(ctx, "report-writer", client.TTL(10*time.Second), client.Wait(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(context.Background())

	// Write under the lease's context (cancelled the moment the lease can no
	// longer be trusted) and through the fence: PostgreSQL itself refuses
	// the write if a newer token has already written to this scope.
	body := strings.Join(os.Args[1:], " ")
	err = pgfence.Exec(lease.Context(), db, "report", lease.Token(), func(tx pgx.Tx) error {
		_, err := tx.Exec(lease.Context(),
			`INSERT INTO report (id, body, token) VALUES (1, $1, $2)
			 ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, token = EXCLUDED.token`,
			body, int64(lease.Token()))
		return err
	})
	if err != nil {
		log.Fatalf("write refused: %v", err)
	}
	fmt.Printf("wrote %q with fencing token %d\n", body, lease.Token())
}
