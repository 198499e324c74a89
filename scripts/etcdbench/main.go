// Command etcdbench runs fencer's benchmark workloads against etcd, through
// etcd's Go client and its concurrency package (Session, Mutex), and prints
// the same results as "fencer bench", measured by the same code (fencer's
// internal/bench/load). It is its own Go module so that fencer never depends on etcd.
//
// Like the fencer side, it talks to the leader only: it asks every endpoint
// for its status and keeps the one that leads. The failover workload is
// different (failover.go): its clients are given every member, and it stops
// the leader's process part way.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/fencer-io/fencer/internal/bench/load"
	"github.com/fencer-io/fencer/internal/bench/outage"
	"github.com/fencer-io/fencer/internal/gcfloor"
)

// workloads mirror fencer's; uncontended-lease is etcd's closest match to a
// fencer grant, which carries its own TTL.
var workloads = []string{"uncontended", "uncontended-lease", "contended", "renew", "fenced-write"}

type options struct {
	endpoints string
	workloads string
	output    string
	ttl       time.Duration
	load      load.Config
	// The failover workload's.
	pids         string
	signal       string
	at           time.Duration
	failDuration time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.endpoints, "endpoints", "127.0.0.1:2379", "comma-separated etcd client endpoints")
	flag.StringVar(&o.workloads, "workload", "uncontended", "comma-separated: "+strings.Join(workloads, ", ")+"; or failover, alone")
	flag.StringVar(&o.output, "o", "text", "output: text or json")
	flag.IntVar(&o.load.Clients, "clients", 16, "concurrent clients")
	flag.DurationVar(&o.load.Duration, "duration", 10*time.Second, "measured time per workload")
	flag.DurationVar(&o.load.Warmup, "warmup", 2*time.Second, "time run before measuring")
	flag.Float64Var(&o.load.Rate, "rate", 0, "open loop: total operations per second (0: closed loop)")
	flag.DurationVar(&o.ttl, "ttl", 10*time.Second, "lease TTL (whole seconds, at least 1s)")
	flag.DurationVar(&o.load.OpTimeout, "wait", 30*time.Second, "time limit of one operation (a contended lock's queueing included)")
	flag.StringVar(&o.pids, "pids", "", "failover: NAME=PID,… the members' processes (-endpoints then NAME=HOST:PORT,…)")
	flag.StringVar(&o.signal, "signal", "TERM", "failover: what stops the leader, TERM (graceful) or KILL (crash)")
	flag.DurationVar(&o.at, "at", 4*time.Second, "failover: when the leader is stopped")
	flag.DurationVar(&o.failDuration, "failover-duration", 10*time.Second, "failover: the whole run, warm-up included")
	flag.Parse()
	// Same as "fencer bench": the measuring client keeps its collector quiet.
	gcfloor.Start(gcfloor.DefaultFloor)
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "etcdbench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.output != "text" && o.output != "json" {
		return fmt.Errorf("-o %q: want text or json", o.output)
	}
	ttl := int(o.ttl / time.Second)
	if ttl < 1 {
		return fmt.Errorf("-ttl %v: etcd leases need at least 1s", o.ttl)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if o.workloads == "failover" {
		return runFailover(ctx, o)
	}
	leader, err := findLeader(ctx, strings.Split(o.endpoints, ","))
	if err != nil {
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{leader}, DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()
	b := &etcdBench{cli: cli, ttl: ttl, prefix: "/bench-" + randomHex(4)}
	results := []load.Result{}
	for _, name := range strings.Split(o.workloads, ",") {
		newClient, err := b.workload(strings.TrimSpace(name))
		if err != nil {
			return err
		}
		res, err := load.Run(ctx, o.load, newClient)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		res.System, res.Workload = "etcd", name
		results = append(results, res)
		if o.output == "text" {
			fmt.Println(res.Text())
		}
	}
	if o.output == "json" {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	return nil
}

// findLeader returns the endpoint of the member that leads, retrying while
// the cluster elects one.
func findLeader(ctx context.Context, endpoints []string) (string, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		return "", err
	}
	defer cli.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, ep := range endpoints {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := cli.Status(ctx, strings.TrimSpace(ep))
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				return strings.TrimSpace(ep), nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return "", errors.New("no etcd member reports itself leader")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type etcdBench struct {
	cli    *clientv3.Client
	ttl    int // seconds
	prefix string
}

func (b *etcdBench) key(kind string, i int) string {
	return b.prefix + "/" + kind + "/" + strconv.Itoa(i)
}

func (b *etcdBench) session(ctx context.Context) (*concurrency.Session, error) {
	return concurrency.NewSession(b.cli, concurrency.WithTTL(b.ttl), concurrency.WithContext(context.WithoutCancel(ctx)))
}

// It is long because it mirrors internal/bench's workload step for step, so
// that the two benchmarks stay comparable side by side.
func (b *etcdBench) workload(name string) (load.Client, error) {
	switch name {
	case "uncontended":
		// One session (lease) per client, reused by every lock cycle: the
		// cheapest way to use etcd's Mutex.
		return func(ctx context.Context, i int) (load.Op, func(), error) {
			s, err := b.session(ctx)
			if err != nil {
				return nil, nil, err
			}
			m := concurrency.NewMutex(s, b.key("u", i))
			op := func(ctx context.Context) error {
				if err := m.Lock(ctx); err != nil {
					return err
				}
				return m.Unlock(ctx)
			}
			return op, func() { s.Close() }, nil
		}, nil
	case "uncontended-lease":
		// A fresh lease per lock, as every fencer grant has its own TTL:
		// grant a lease, lock, and revoke the lease, which deletes the lock
		// key (the cheapest correct release; an Unlock first would add a
		// fourth write).
		return func(_ context.Context, i int) (load.Op, func(), error) {
			key := b.key("l", i)
			return func(ctx context.Context) error {
				s, err := b.session(ctx)
				if err != nil {
					return err
				}
				lerr := concurrency.NewMutex(s, key).Lock(ctx)
				return errors.Join(lerr, s.Close())
			}, nil, nil
		}, nil
	case "contended":
		// Every client has its own session and queues on one key; etcd's
		// Mutex serves waiters in order of their keys' creation revision.
		key := b.key("c", 0)
		return func(ctx context.Context, _ int) (load.Op, func(), error) {
			s, err := b.session(ctx)
			if err != nil {
				return nil, nil, err
			}
			m := concurrency.NewMutex(s, key)
			op := func(ctx context.Context) error {
				if err := m.Lock(ctx); err != nil {
					return err
				}
				return m.Unlock(ctx)
			}
			return op, func() { s.Close() }, nil
		}, nil
	case "renew":
		return func(ctx context.Context, _ int) (load.Op, func(), error) {
			lease, err := b.cli.Grant(ctx, int64(b.ttl))
			if err != nil {
				return nil, nil, err
			}
			op := func(ctx context.Context) error {
				_, err := b.cli.KeepAliveOnce(ctx, lease.ID)
				return err
			}
			return op, func() { b.cli.Revoke(context.Background(), lease.ID) }, nil
		}, nil
	case "fenced-write":
		// etcd's fencing idiom: the write is a transaction conditioned on
		// the lock key still being ours (Mutex.IsOwner).
		return func(ctx context.Context, i int) (load.Op, func(), error) {
			s, err := b.session(ctx)
			if err != nil {
				return nil, nil, err
			}
			m := concurrency.NewMutex(s, b.key("f", i))
			key := b.key("k", i)
			value := string(bytes.Repeat([]byte("v"), 64))
			op := func(ctx context.Context) error {
				if err := m.Lock(ctx); err != nil {
					return err
				}
				resp, err := b.cli.Txn(ctx).If(m.IsOwner()).Then(clientv3.OpPut(key, value)).Commit()
				if err == nil && !resp.Succeeded {
					err = errors.New("fenced write refused: not the lock owner")
				}
				return errors.Join(err, m.Unlock(ctx))
			}
			return op, func() { s.Close() }, nil
		}, nil
	}
	return nil, fmt.Errorf("workload %q: want one of %v", name, workloads)
}

// report prints one failover result.
func report(o options, res outage.Result) error {
	if o.output == "json" {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Println(res.Text())
	fmt.Println("timeline (ms after the signal):", res.Timeline)
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
