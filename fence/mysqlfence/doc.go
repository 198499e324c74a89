// Package mysqlfence fences writes to MySQL and MariaDB (InnoDB) with
// fencer's tokens, on database/sql and github.com/go-sql-driver/mysql.
//
// The rule is the fence package's, Mark.Admits (a write is accepted only if
// its token is strictly greater than the last accepted one, or equal with a
// greater Fencing-Sequence; missing and zero tokens are refused), and the
// API is pgfence's: Exec and ExecSeq run the caller's writes in the
// transaction that advances a scope's mark in fencer_high_water; UpdateRow
// and UpsertRow fence a table row by row through a fence_token column.
//
// # Why it is correct
//
// The check has to be made by the database, against the newest committed
// mark, under a lock held until the data it guards commits. InnoDB gives
// that through a locking read, not through an isolation level:
//
//   - Advance reads the scope's row with SELECT ... FOR UPDATE. A locking
//     read never reads a snapshot: at every isolation level it reads the
//     newest committed version, and it takes an exclusive lock on the row
//     that is held until the transaction ends. A second writer of the scope
//     blocks in its own SELECT ... FOR UPDATE until the first commits or
//     rolls back, and then reads what the first left. So the comparison
//     (Mark.Admits, in Go, on the locked row) and the UPDATE that follows
//     it cannot interleave with another writer's, and the caller's writes
//     commit or roll back with the mark. A plain SELECT here would be the
//     classic bug: under REPEATABLE READ it reads the transaction's
//     snapshot, and under any level two writers read the same mark, both
//     pass, and the later commit wins whatever its token.
//   - A scope seen for the first time has no row to lock. Its first mark is
//     an INSERT; InnoDB's unique-key check makes a second INSERT of the same
//     scope wait for the first transaction and then fail with a duplicate
//     key (1062), after which Advance reads again, now with FOR UPDATE on a
//     row that exists. A duplicate-key error ends the statement, not the
//     transaction, so the retry happens in place.
//   - ExecSeq runs at READ COMMITTED, set on the transaction so that a
//     server's or session's default cannot change it. The mark does not
//     depend on it (see above), but two things do: the caller's plain reads
//     in fn see every write committed before the mark was locked (under
//     READ UNCOMMITTED they could see a stale writer's write that is about
//     to roll back), and READ COMMITTED takes no gap locks, so writers of
//     two new scopes do not deadlock on the gap between them as they can
//     under REPEATABLE READ. A deadlock (1213) anywhere rolls the whole
//     transaction back and is returned: it refuses the write, never admits
//     it.
//   - UpdateRow is one UPDATE ... WHERE fence_token < ?. An UPDATE locks the
//     row and evaluates its WHERE on the newest committed version (InnoDB
//     re-reads a row it had to wait for), so it is atomic on its own, in or
//     out of a transaction. UpsertRow is that UPDATE, and for a row that
//     does not exist yet an INSERT, which the unique key makes fail for a
//     row a racing writer created first; then the UPDATE is tried again.
//     Each statement alone decides for the row it writes.
//
// The fenced tables, fencer_high_water and the caller's, must be InnoDB: a
// MyISAM table has no transactions and no row locks, so its write happens
// even when the mark's transaction rolls back. Migration says ENGINE=InnoDB.
//
// Scopes are VARBINARY, compared byte for byte: the default collations
// would make "Job" and "job " one scope.
//
// Tokens are BIGINT UNSIGNED, which holds every fencer token (uint64), so
// unlike pgfence no token is out of range. Rows affected are never read for
// the decision where the DSN's clientFoundRows would change their meaning:
// UpdateRow's UPDATE always changes fence_token, so a matched row is a
// changed one.
//
// Marks are as durable as the commit: InnoDB's default
// innodb_flush_log_at_trx_commit=1 writes and syncs the redo log at every
// commit. At 0 or 2 a crash can lose the last second of commits, marks and
// data together, and a writer told its write committed can then be passed by
// an older token.
package mysqlfence
