package logstore

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// BenchmarkStoreLogs measures one write of a batch of entries the size of
// a fencer acquire, fsync included, to each store on this machine's disk:
// bolt as fencer opens it (Vault's NoFreelistSync and map freelist), bolt
// with bbolt's defaults, and wal. Batches of 1 are what one client at a
// time costs; 64, a loaded leader's group commit. Run the set several
// times and compare medians: the disk is shared.
//
//	go test -run '^$' -bench StoreLogs -benchtime 2s -count 3 ./cluster/logstore/
func BenchmarkStoreLogs(b *testing.B) {
	stores := []struct {
		name string
		open func(dir string) (Store, error)
	}{
		{"bolt", func(dir string) (Store, error) { return openAt(filepath.Join(dir, "raft.db"), Bolt, quiet) }},
		{"bolt-defaults", func(dir string) (Store, error) {
			return raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db"), BoltOptions: &bbolt.Options{Timeout: time.Second}})
		}},
		{"wal", func(dir string) (Store, error) { return openAt(filepath.Join(dir, "wal"), WAL, quiet) }},
	}
	data := make([]byte, 120)
	for _, batch := range []int{1, 64} {
		for _, st := range stores {
			b.Run(fmt.Sprintf("batch=%d/store=%s", batch, st.name), func(b *testing.B) {
				s, err := st.open(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				next := uint64(1)
				logs := make([]*raft.Log, batch)
				b.ResetTimer()
				for range b.N {
					for j := range logs {
						logs[j] = &raft.Log{Index: next, Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
						next++
					}
					if err := s.StoreLogs(logs); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
			})
		}
	}
}
