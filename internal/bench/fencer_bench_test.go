package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/cluster/logstore"
	"github.com/fencer-io/fencer/internal/bench/load"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// BenchmarkFencer runs the workloads against an in-process 3-node cluster
// per log store (real Raft over loopback TCP, log files with fsync,
// production timings), so that one process holds the client and all three
// nodes for pprof, and shares one Go runtime as BenchmarkRaftApply's nodes
// do, which makes the two comparable:
//
//	go test -run '^$' -bench 'Fencer/store=bolt/uncontended/clients=64' -benchtime 20000x \
//	  -cpuprofile cpu.out ./internal/bench/ && go tool pprof -top bench.test cpu.out
//
// Against separate processes the numbers differ (each hand-off between
// nodes then wakes another process), so the script's table, not this, is
// what compares with etcd.
func BenchmarkFencer(b *testing.B) {
	for _, store := range logStores {
		b.Run("store="+string(store), func(b *testing.B) { benchmarkFencer(b, store) })
	}
}

func benchmarkFencer(b *testing.B, store logstore.Kind) {
	c := tc.New(b, 3, tc.Options{Configure: func(cfg *cluster.Config) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 0, 0, 0
		cfg.LogStore = store
	}})
	leader := c.WaitLeader(20 * time.Second)
	for _, w := range []string{"uncontended", "contended", "renew", "fenced-write"} {
		for _, clients := range []int{1, 16, 64} {
			for _, proto := range []string{"http1", "h2c"} {
				if w == "contended" && clients == 1 {
					continue
				}
				b.Run(fmt.Sprintf("%s/clients=%d/proto=%s", w, clients, proto), func(b *testing.B) {
					ctx := context.Background()
					f, err := NewFencer(ctx, []string{leader.HTTPAddr}, clients, 10*time.Second, 30*time.Second, 10*time.Second, Conn{HTTP2: proto == "h2c"})
					if err != nil {
						b.Fatal(err)
					}
					defer f.Client.Close()
					newClient, err := f.Workload(w)
					if err != nil {
						b.Fatal(err)
					}
					b.ResetTimer()
					res, err := load.Run(ctx, load.Config{Clients: clients, Duration: time.Hour, Ops: int64(b.N)}, newClient)
					if err != nil {
						b.Fatal(err)
					}
					if res.Errors > 0 {
						b.Fatalf("%d errors, first: %s", res.Errors, res.FirstError)
					}
					b.ReportMetric(res.OpsPerSec, "ops/s")
					b.ReportMetric(res.P50Ms, "p50-ms")
					b.ReportMetric(res.P99Ms, "p99-ms")
				})
			}
		}
	}
}
