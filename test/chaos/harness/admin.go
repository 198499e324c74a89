package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// adminClient talks to nodes directly, without the client library's leader
// following: the harness wants each node's own view.
var adminClient = &http.Client{Timeout: 2 * time.Second}

// getJSON asks one node for path and decodes its answer into out.
func getJSON(ctx context.Context, httpAddr, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+path, nil)
	if err != nil {
		return err
	}
	resp, err := adminClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s%s: %s: %s", httpAddr, path, resp.Status, body)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(body, out)
}

// send makes a request to one node and reports a non-2xx answer as an
// error.
func send(ctx context.Context, method, httpAddr, path string) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+httpAddr+path, nil)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 15 * time.Second} // removing a leader transfers first
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s%s: %s: %s", method, httpAddr, path, resp.Status, body)
	}
	return nil
}

// status is one node's GET /v1/cluster.
func status(ctx context.Context, httpAddr string) (wire.ClusterStatus, error) {
	var st wire.ClusterStatus
	err := getJSON(ctx, httpAddr, "/v1/cluster", &st)
	return st, err
}

// digest is one node's GET /v1/debug/state.
func digest(ctx context.Context, httpAddr string) (wire.StateDigest, error) {
	var d wire.StateDigest
	err := getJSON(ctx, httpAddr, "/v1/debug/state", &d)
	return d, err
}

// ready reports whether a node answers GET /readyz with 200.
func ready(ctx context.Context, httpAddr string) bool {
	return getJSON(ctx, httpAddr, "/readyz", nil) == nil
}

// poll calls cond every interval until it returns true or ctx ends, and
// returns the last error cond reported.
func poll(ctx context.Context, interval time.Duration, cond func() (bool, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		// An attempt cut short by the deadline says less than the one
		// before it: keep that one's reason.
		if err != nil && (last == nil || ctx.Err() == nil) {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
			}
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Metrics reads a node's GET /metrics and returns the value of every
// unlabelled sample named in names that it exports.
func Metrics(ctx context.Context, httpAddr string, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := adminClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", httpAddr, resp.Status)
	}
	want := map[string]bool{}
	for _, name := range names {
		want[name] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !want[name] {
			continue // a comment, a labelled sample, or one not asked for
		}
		fields := strings.Fields(value) // a value may be followed by a timestamp
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("%s/metrics: %s: %w", httpAddr, name, err)
		}
		out[name] = v
	}
	return out, sc.Err()
}
