package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/fencer-io/fencer/internal/bench/load"
	"github.com/fencer-io/fencer/internal/bench/outage"
)

// failover is the etcd side of fencer's failover benchmark
// (internal/bench/failoverbench): clients cycle their own locks through
// every member with etcd's Go client (each given every endpoint, starting
// at a different one), the leader's process gets a signal, and the result
// is the longest interval in which no cycle succeeded. etcd hands
// leadership over when it is stopped with SIGTERM.
type failover struct {
	members map[string]string // name → client address
	pids    map[string]int
	sig     syscall.Signal
	ttl     int // seconds
	prefix  string

	timeline outage.Timeline
}

func runFailover(ctx context.Context, o options) error {
	f := &failover{members: map[string]string{}, pids: map[string]int{}, ttl: int(o.ttl / time.Second), prefix: "/failover-" + randomHex(4)}
	for _, part := range strings.Split(o.endpoints, ",") {
		name, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("-endpoints %q: the failover workload wants NAME=HOST:PORT for every member", part)
		}
		f.members[name] = addr
	}
	for _, part := range strings.Split(o.pids, ",") {
		name, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		pid, err := strconv.Atoi(v)
		if !ok || err != nil {
			return fmt.Errorf("-pids %q: want NAME=PID", part)
		}
		f.pids[name] = pid
	}
	sig, mode, err := outage.StopSignal(o.signal)
	if err != nil {
		return err
	}
	f.sig = sig
	cfg := outage.Config{Clients: o.load.Clients, Duration: o.failDuration, Warmup: o.load.Warmup, At: o.at, OpTimeout: o.load.OpTimeout,
		Group: func(int) string { return "clientv3" }, Event: f.stopLeader}
	res, err := outage.Run(ctx, cfg, f.client)
	if err != nil {
		return err
	}
	res.System, res.Mode = "etcd", mode
	res.Timeline = f.timeline.Marks()
	return report(o, res)
}

func (f *failover) names() []string {
	names := make([]string, 0, len(f.members))
	for n := range f.members {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// client is one etcd client with its own session; its endpoints start at
// member i mod n. A cycle that fails moves on to a fresh lock key.
func (f *failover) client(ctx context.Context, i int) (load.Op, func(), error) {
	names := f.names()
	var eps []string
	for k := range names {
		eps = append(eps, f.members[names[(i+k)%len(names)]])
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, nil, err
	}
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(f.ttl), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		cli.Close()
		return nil, nil, err
	}
	gen := 0
	op := func(ctx context.Context) error {
		m := concurrency.NewMutex(s, f.prefix+"/"+strconv.Itoa(i)+"/"+strconv.Itoa(gen))
		err := m.Lock(ctx)
		if err == nil {
			err = m.Unlock(ctx)
		}
		if err != nil {
			gen++
		}
		return err
	}
	return op, func() { s.Close(); cli.Close() }, nil
}

// stopLeader signals the leader's process and follows the survivors'
// views of the cluster.
func (f *failover) stopLeader(ctx context.Context) (string, error) {
	eps := make([]string, 0, len(f.members))
	for _, n := range f.names() {
		eps = append(eps, f.members[n])
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return "", err
	}
	leader, leaderID := "", uint64(0)
	for _, n := range f.names() {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cli.Status(sctx, f.members[n])
		cancel()
		if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
			leader, leaderID = n, st.Leader
		}
	}
	if leader == "" {
		cli.Close()
		return "", errors.New("no member reports itself leader")
	}
	pid, ok := f.pids[leader]
	if !ok {
		cli.Close()
		return "", fmt.Errorf("no pid for leader %s", leader)
	}
	f.timeline.Start(time.Now())
	if err := syscall.Kill(pid, f.sig); err != nil {
		cli.Close()
		return "", err
	}
	go func() {
		defer cli.Close()
		f.follow(context.WithoutCancel(ctx), cli, leader, leaderID, pid)
	}()
	return fmt.Sprintf("stopped leader %s (pid %d) with %v", leader, pid, f.sig), nil
}

// follow records when the old leader's process exited, when a survivor
// first reported a new leader, and when every survivor did.
func (f *failover) follow(ctx context.Context, cli *clientv3.Client, old string, oldID uint64, pid int) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	mark := f.timeline.Mark
	var wg sync.WaitGroup
	wg.Go(func() { f.timeline.FollowExit(ctx, pid) })
	knows := map[string]bool{}
	survivors := len(f.members) - 1
	for ctx.Err() == nil && len(knows) < survivors {
		for _, n := range f.names() {
			if n == old {
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			st, err := cli.Status(sctx, f.members[n])
			cancel()
			if err == nil && st.Leader != 0 && st.Leader != oldID {
				mark("new_leader_known")
				knows[n] = true
			}
		}
		time.Sleep(2 * time.Millisecond) // sampling interval
	}
	if len(knows) == survivors {
		mark("all_survivors_know_leader")
	}
	wg.Wait()
}
