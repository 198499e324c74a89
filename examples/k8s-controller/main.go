// Command k8s-controller is a controller that leads through client-go's
// LeaderElector on a fencer election (integrations/k8sleader), and sends
// its term, the election's fencing token, with every write it makes, so
// that the resource refuses a leader that was paused past its lease.
//
// It writes to the example fenced resource (fencer resource serve); a real
// controller sends the term to whatever checks it (fencer fence-proxy in
// front of a service, fence/pgfence, ...: docs/fences.md). README.md says
// how to run it and how to plug the lock into controller-runtime.
package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/leaderelection"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/integrations/k8sleader"
)

// The elector's timing: client-go's usual values. The grant's TTL is the
// lease duration; renewals (every RetryPeriod) are the grant's only ones.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

func main() {
	endpoints := strings.Split(env("FENCER_ENDPOINTS", "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"), ",")
	resource := env("RESOURCE_URL", "http://127.0.0.1:7100")
	identity := env("POD_NAME", client.DefaultHolder())

	c, err := client.New(endpoints)
	if err != nil {
		log.Fatal(err)
	}
	lock, err := k8sleader.New(k8sleader.Config{
		Client:   c,
		Election: "example-controller",
		Identity: identity,
		TTL:      leaseDuration,
		OnEvent:  func(ev string) { log.Printf("%s: %s", identity, ev) },
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: leaseDuration,
		RenewDeadline: renewDeadline,
		RetryPeriod:   retryPeriod,
		// On SIGTERM, resign: the next leader starts at once instead of
		// after a lease duration.
		ReleaseOnCancel: true,
		Name:            "example-controller",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { reconcile(ctx, resource, identity, lock.Term()) },
			OnStoppedLeading: func() { log.Printf("%s: stopped leading", identity) },
			OnNewLeader:      func(id string) { log.Printf("%s: the leader is %s", identity, id) },
		},
	})
}

// reconcile is the controller's work while it leads with term: here, one
// write a second to the resource. Each write carries the term, and a
// sequence because the term writes the same key many times.
func reconcile(ctx context.Context, resource, identity string, term uint64) {
	log.Printf("%s: leading with term %d", identity, term)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for seq := uint64(1); ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		body := fmt.Sprintf("reconciled by %s, term %d, write %d", identity, term, seq)
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, resource+"/v1/data/example-controller", strings.NewReader(body))
		if err != nil {
			log.Fatal(err)
		}
		req.Header.Set(wire.HeaderToken, strconv.FormatUint(term, 10))
		req.Header.Set(wire.HeaderSequence, strconv.FormatUint(seq, 10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Printf("%s: write %d: %v", identity, seq, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusConflict {
			// A greater term has written: this leader is deposed, whatever
			// its elector believes. Stop, as a controller must.
			log.Fatalf("%s: write %d with term %d refused (%s): deposed", identity, seq, term, resp.Status)
		}
		log.Printf("%s: write %d with term %d: %s", identity, seq, term, resp.Status)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
