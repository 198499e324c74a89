package uitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// The browser tests run fencer as real processes, so that "the leader is
// killed" is a SIGKILL, as an operator's page would see it.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// fencerBinary builds cmd/fencer once per test binary.
func fencerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "fencer-ui-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "fencer")
		out, err := exec.Command("go", "build", "-o", binPath, "../../cmd/fencer").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build fencer: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

type proc struct {
	id, http, raft, dir string
	args                []string
	cmd                 *exec.Cmd
	done                chan struct{}
}

func (p *proc) url() string { return "http://" + p.http }

type procCluster struct {
	t     *testing.T
	bin   string
	dir   string
	nodes []*proc
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startCluster starts n `fencer serve` processes with --initial-cluster on
// free loopback ports, each with the extra flags, and waits until every one
// is ready.
func startCluster(t *testing.T, n int, extra ...string) *procCluster {
	t.Helper()
	c := &procCluster{t: t, bin: fencerBinary(t), dir: t.TempDir()}
	var initial []string
	for i := 1; i <= n; i++ {
		p := &proc{id: fmt.Sprintf("n%d", i), http: freePort(t), raft: freePort(t)}
		p.dir = filepath.Join(c.dir, p.id)
		c.nodes = append(c.nodes, p)
		initial = append(initial, fmt.Sprintf("%s=%s@%s", p.id, p.raft, p.http))
	}
	for _, p := range c.nodes {
		p.args = append([]string{"serve", "--id", p.id, "--data-dir", p.dir, "--http-addr", p.http, "--raft-addr", p.raft,
			"--initial-cluster", strings.Join(initial, ","), "--log-level", "warn",
			// Generous for a loaded 2-core machine, as testcluster's: a
			// leader deposed by a slow heartbeat would move the term under
			// the tests' feet. A crash still costs only a few seconds.
			"--election-timeout", "1s"}, extra...)
		c.start(p)
	}
	t.Cleanup(c.close)
	tc.Poll(t, 30*time.Second, "every node ready", func() bool {
		for _, p := range c.nodes {
			if st, _ := get(p, "/readyz", ""); st != http.StatusOK {
				return false
			}
		}
		return true
	})
	return c
}

func (c *procCluster) start(p *proc) {
	c.t.Helper()
	log, err := os.Create(filepath.Join(c.dir, p.id+".log"))
	if err != nil {
		c.t.Fatal(err)
	}
	p.cmd = exec.Command(c.bin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	p.done = make(chan struct{})
	go func() {
		p.cmd.Wait()
		log.Close()
		close(p.done)
	}()
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *procCluster) kill(p *proc) {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (c *procCluster) close() {
	for _, p := range c.nodes {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, p := range c.nodes {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	}
	if c.t.Failed() {
		for _, p := range c.nodes {
			if b, err := os.ReadFile(filepath.Join(c.dir, p.id+".log")); err == nil {
				c.t.Logf("%s's log:\n%s", p.id, b)
			}
		}
	}
}

func (c *procCluster) node(id string) *proc {
	for _, p := range c.nodes {
		if p.id == id {
			return p
		}
	}
	c.t.Fatalf("no node %s", id)
	return nil
}

// status is GET /v1/cluster on p, with a bearer token when one is given.
func (c *procCluster) status(p *proc, token string) (wire.ClusterStatus, bool) {
	var st wire.ClusterStatus
	code, body := get(p, "/v1/cluster", token)
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
		return st, false
	}
	return st, true
}

// agreedLeader waits until every running node names the same leader, other
// than not, and applied the cluster's grant history settings (a grant made
// before them is not recorded, and the token box would not find it), and
// returns the leader with p's status.
func (c *procCluster) agreedLeader(p *proc, token, not string, timeout time.Duration) wire.ClusterStatus {
	c.t.Helper()
	var st wire.ClusterStatus
	tc.Poll(c.t, timeout, "a leader every running node names", func() bool {
		var ok bool
		if st, ok = c.status(p, token); !ok || st.Leader == "" || st.Leader == not || st.GrantHistory == nil {
			return false
		}
		for _, q := range c.nodes {
			select {
			case <-q.done:
				continue
			default:
			}
			if s, ok := c.status(q, token); !ok || s.Leader != st.Leader || s.GrantHistory == nil {
				return false
			}
		}
		return true
	})
	return st
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

func request(p *proc, method, path, token, body string) (int, string) {
	req, err := http.NewRequest(method, p.url()+path, strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func get(p *proc, path, token string) (int, string) {
	return request(p, http.MethodGet, path, token, "")
}
