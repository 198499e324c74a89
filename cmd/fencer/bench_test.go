package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/internal/bench/load"
)

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "-w", "nope"},
		{"bench", "-w", ","},
		{"bench", "-c", "0"},
		{"bench", "-d", "0s"},
		{"bench", "--ttl", "10ms"},
		{"bench", "--wait", "2m"},
		{"bench", "--rate", "-1"},
		{"bench", "-o", "yaml"},
	} {
		if _, _, err := fencer(t, "", args...); err == nil {
			t.Errorf("%v: want an error", args)
		}
	}
}

func TestBenchRunsEveryWorkload(t *testing.T) {
	newTestCluster(t)
	// --ops ends each run after a fixed number of operations, so the test
	// does not depend on how fast the machine is.
	out, _, err := fencer(t, "", "bench", "-w", "uncontended,contended,renew,fenced-write,hold",
		"-c", "3", "--ops", "12", "-d", "1m", "--warmup", "0s", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var results []load.Result
	if err := json.Unmarshal([]byte(out), &results); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(results) != 5 {
		t.Fatalf("%d results, want 5: %s", len(results), out)
	}
	for _, r := range results {
		if r.System != "fencer" || r.Clients != 3 || r.Ops != 12 || r.Errors != 0 {
			t.Errorf("%s: %+v, want 12 ops by 3 clients and no errors", r.Workload, r)
		}
	}

	text, _, err := fencer(t, "", "bench", "-w", "uncontended", "-c", "2", "--ops", "4", "-d", "1m", "--warmup", "0s")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "uncontended") || !strings.Contains(text, "ops=4 errors=0") {
		t.Errorf("text output: %q", text)
	}
}
