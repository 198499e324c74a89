package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/harness"
	"github.com/fencer-io/fencer/test/chaos/history"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// electionWriterEnv carries the URL a campaigner's command writes to.
const electionWriterEnv = "FENCER_TEST_ELECTION_WRITER"

// writerLine is what the writer prints on stdout: its start, and each
// write with the resource's answer (0: no answer).
type writerLine struct {
	Writer int    `json:"writer"` // pid
	Token  uint64 `json:"token"`
	Seq    uint64 `json:"seq,omitempty"`
	Status int    `json:"status,omitempty"`
	// Flush marks the write made on SIGTERM, as a careless leader flushes
	// its buffer on the way out.
	Flush bool `json:"flush,omitempty"`
}

// runElectionWriter is a leader's work: it writes to the fenced resource
// with its term (FENCER_TOKEN) every 100ms, and once more on SIGTERM.
func runElectionWriter() int {
	token, err := strconv.ParseUint(os.Getenv("FENCER_TOKEN"), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "election writer: FENCER_TOKEN:", err)
		return 2
	}
	url := os.Getenv(electionWriterEnv)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	hc := &http.Client{Timeout: 2 * time.Second}
	out := json.NewEncoder(os.Stdout)
	pid := os.Getpid()
	out.Encode(writerLine{Writer: pid, Token: token})
	var seq uint64
	write := func(flush bool) {
		seq++
		req, err := http.NewRequest(http.MethodPut, url, strings.NewReader(fmt.Sprintf("t%d.s%d", token, seq)))
		if err != nil {
			panic(err)
		}
		req.Header.Set(wire.HeaderToken, strconv.FormatUint(token, 10))
		req.Header.Set(wire.HeaderSequence, strconv.FormatUint(seq, 10))
		status := 0
		if resp, err := hc.Do(req); err == nil {
			status = resp.StatusCode
			resp.Body.Close()
		}
		out.Encode(writerLine{Writer: pid, Token: token, Seq: seq, Status: status, Flush: flush})
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			write(true)
			return 0
		case <-tick.C:
			write(false)
		}
	}
}

// sighting is one line of `fencer leader --watch`.
type sighting struct {
	Holder string
	Term   uint64
	Value  string
}

var sightingLine = regexp.MustCompile(`^election=\S+ leader=("(?:[^"\\]|\\.)*") term=(\d+) value=("(?:[^"\\]|\\.)*")$`)

func parseSighting(line string) (sighting, bool) {
	m := sightingLine.FindStringSubmatch(line)
	if m == nil {
		return sighting{}, false
	}
	var s sighting
	var err1, err2, err3 error
	s.Holder, err1 = strconv.Unquote(m[1])
	s.Term, err2 = strconv.ParseUint(m[2], 10, 64)
	s.Value, err3 = strconv.Unquote(m[3])
	return s, err1 == nil && err2 == nil && err3 == nil
}

// electionRun records what the campaigners' writers and the observers
// printed.
type electionRun struct {
	mu       sync.Mutex
	writes   []writerLine
	observed map[int][]sighting // by observer (node index)
}

func (r *electionRun) writer(line []byte) {
	var l writerLine
	if json.Unmarshal(line, &l) != nil || l.Writer == 0 {
		return // fencer elect's own output
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, l)
}

func (r *electionRun) observer(i int) func([]byte) {
	return func(line []byte) {
		s, ok := parseSighting(string(line))
		if !ok {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.observed[i] = append(r.observed[i], s)
	}
}

// leader returns the last term every observer has seen, once they agree.
func (r *electionRun) leader(observers int) (sighting, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var last sighting
	for i := range observers {
		seen := r.observed[i]
		if len(seen) == 0 {
			return sighting{}, false
		}
		s := seen[len(seen)-1]
		if i > 0 && s.Term != last.Term {
			return sighting{}, false
		}
		last = s
	}
	return last, true
}

// writerOf returns the pid of the writer running with token, if it started.
func (r *electionRun) writerOf(token uint64) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.writes {
		if w.Token == token {
			return w.Writer, true
		}
	}
	return 0, false
}

// writers returns the pid of every writer that started.
func (r *electionRun) writers() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, w := range r.writes {
		if w.Seq == 0 {
			out = append(out, w.Writer)
		}
	}
	return out
}

// wrote reports whether a write with token got status, from index from of
// the writes on.
func (r *electionRun) wrote(token uint64, status, from int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.writes[min(from, len(r.writes)):] {
		if w.Token == token && w.Seq > 0 && w.Status == status {
			return true
		}
	}
	return false
}

func (r *electionRun) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.writes)
}

// An election with three campaigners (`fencer elect` processes running a
// writer that writes to the fenced resource with its term) and an observer
// (`fencer leader --watch`) on every node of a 3-node cluster of real
// processes. The leader is SIGKILLed (its orphaned writer keeps going),
// then the next one is SIGSTOPped past its TTL, then the next is cut off
// from every node. Each time another campaigner must take over with a
// greater term, every observer must see each term once, in order, and the
// deposed leaders' writes after a newer term wrote must be refused.
func TestElectionLeaderKilledPausedPartitioned(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster of processes")
	}
	work := t.TempDir()
	bin, err := harness.BuildFencer(work)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(work, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	group := &harness.Group{}
	run := &electionRun{observed: map[int][]sighting{}}
	t.Cleanup(func() {
		// The writers first: each holds its fencer elect's stdout open,
		// and the group waits for that to close.
		for _, pid := range run.writers() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		group.KillAll()
		if t.Failed() {
			run.mu.Lock()
			t.Logf("writes: %+v\nobserved: %+v", run.writes, run.observed)
			run.mu.Unlock()
			for _, name := range []string{"n1", "n2", "n3", "client-0", "client-1", "client-2", "client-3"} {
				b, _ := os.ReadFile(filepath.Join(logs, name+".log"))
				t.Logf("--- %s.log (tail)\n%s", name, tail(string(b), 40))
			}
		}
	})
	const campaigners, observers = 3, 3
	cl, err := harness.NewCluster(harness.Options{Bin: bin, Dir: filepath.Join(work, "nodes"), LogDir: logs,
		Nodes: observers, Clients: campaigners + observers, Group: group})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rs, err := harness.NewResource(harness.ResourceOptions{Bin: bin, DataDir: filepath.Join(work, "resource"),
		Log: filepath.Join(logs, "resource.log"), Group: group})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	if err := rs.Start(ctx); err != nil {
		t.Fatal(err)
	}
	const key = "res.election"

	// Observers first: client campaigners+i watches through node i alone.
	for i := range observers {
		name := harness.ClientName(campaigners + i)
		_, err := group.Start(harness.Spec{Name: name, Path: bin, Log: filepath.Join(logs, name+".log"),
			Args:  []string{"leader", "scheduler", "--watch", "--endpoints", cl.ClientEndpoints(campaigners + i)[i]},
			Lines: run.observer(i)})
		if err != nil {
			t.Fatal(err)
		}
	}
	procs := make([]*harness.Proc, campaigners)
	campaign := func(i int) {
		name := harness.ClientName(i)
		p, err := group.Start(harness.Spec{Name: name, Path: bin, Log: filepath.Join(logs, name+".log"),
			Args: []string{"elect", "scheduler", "--value", fmt.Sprintf("10.0.0.%d:8080", i+1), "--holder", name,
				"--ttl", "2s", "--endpoints", strings.Join(cl.ClientEndpoints(i), ","), "--", self},
			Env:   []string{electionWriterEnv + "=" + rs.URL() + "/v1/data/" + key},
			Lines: run.writer})
		if err != nil {
			t.Fatal(err)
		}
		procs[i] = p
	}
	for i := range campaigners {
		campaign(i)
	}
	holderIndex := func(holder string) int {
		for i := range campaigners {
			if holder == harness.ClientName(i) {
				return i
			}
		}
		t.Fatalf("unknown holder %q", holder)
		return -1
	}
	// elected waits until every observer sees a term above after, and its
	// leader's writer has had a write accepted.
	elected := func(what string, after uint64) sighting {
		t.Helper()
		var s sighting
		tc.Poll(t, 30*time.Second, what, func() bool {
			var ok bool
			s, ok = run.leader(observers)
			return ok && s.Term > after && run.wrote(s.Term, http.StatusOK, 0)
		})
		t.Logf("%s: %s leads in term %d with %q", what, s.Holder, s.Term, s.Value)
		return s
	}

	// 1. SIGKILL the leader. Its writer, in a process group of its own,
	// lives on and keeps writing with the old term.
	first := elected("the first leader", 0)
	killed := holderIndex(first.Holder)
	orphan, ok := run.writerOf(first.Term)
	if !ok {
		t.Fatal("no writer started for the first term")
	}
	// Not Proc.Kill, which waits for the stdout the orphan still holds.
	syscall.Kill(procs[killed].Pid(), syscall.SIGKILL)
	second := elected("a leader after the SIGKILL", first.Term)
	if second.Holder == first.Holder {
		t.Fatalf("the killed campaigner %s leads again", first.Holder)
	}
	tc.Poll(t, 10*time.Second, "the killed leader's orphaned writer to be refused", func() bool {
		return run.wrote(first.Term, http.StatusConflict, 0)
	})
	syscall.Kill(orphan, syscall.SIGKILL)
	campaign(killed)

	// 2. SIGSTOP the leader and its writer past the TTL; on SIGCONT the
	// writer writes with its old term (its next tick, or the flush when
	// fencer elect, finding the lease lost, sends it SIGTERM).
	paused := holderIndex(second.Holder)
	writer, ok := run.writerOf(second.Term)
	if !ok {
		t.Fatal("no writer started for the second term")
	}
	if err := procs[paused].Pause(); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(writer, syscall.SIGSTOP)
	third := elected("a leader after the SIGSTOP", second.Term)
	if third.Holder == second.Holder {
		t.Fatalf("the paused campaigner %s leads again", second.Holder)
	}
	woke := run.mark()
	syscall.Kill(writer, syscall.SIGCONT)
	if err := procs[paused].Resume(); err != nil {
		t.Fatal(err)
	}
	tc.Poll(t, 10*time.Second, "the paused leader's write on waking to be refused", func() bool {
		return run.wrote(second.Term, http.StatusConflict, woke)
	})
	// Asked of the resource, in the order it accepted writes: the writers'
	// own lines come through a pipe read asynchronously, so a write
	// accepted before the pause (its line still unread, or the writer
	// stopped before writing it) can be seen after the mark (it failed so
	// once under load).
	if acceptedAfter(rs.Accepted()[key], second.Term, third.Term) {
		t.Errorf("the paused leader's write with term %d was accepted after term %d wrote", second.Term, third.Term)
	}
	if !procs[paused].WaitExit(15 * time.Second) {
		t.Fatalf("fencer elect did not exit after losing its term")
	}
	if code := exitCode(procs[paused].ExitErr()); code != 75 {
		t.Errorf("the paused campaigner exited %d, want 75 (leadership lost)", code)
	}
	campaign(paused)

	// 3. Cut the leader off from every node.
	cut := holderIndex(third.Holder)
	cl.Partition([]string{harness.ClientName(cut)}, []string{"n1", "n2", "n3"})
	fourth := elected("a leader after the partition", third.Term)
	if fourth.Holder == third.Holder {
		t.Fatalf("the partitioned campaigner %s leads again", third.Holder)
	}
	if !procs[cut].WaitExit(15 * time.Second) {
		t.Fatalf("the partitioned fencer elect did not exit")
	}
	cl.HealNetwork()

	// Every observer saw the same terms, each once and in order.
	run.mu.Lock()
	defer run.mu.Unlock()
	var terms [observers][]uint64
	for i := range observers {
		var last sighting
		for j, s := range run.observed[i] {
			switch {
			case j == 0:
			case s.Term < last.Term:
				t.Errorf("observer on n%d saw term %d after %d", i+1, s.Term, last.Term)
			case s == last:
				t.Errorf("observer on n%d saw term %d with %q twice", i+1, s.Term, s.Value)
			case s.Term == last.Term && s.Holder != last.Holder:
				t.Errorf("observer on n%d saw term %d held by %s and %s", i+1, s.Term, last.Holder, s.Holder)
			}
			if j == 0 || s.Term != last.Term {
				terms[i] = append(terms[i], s.Term)
			}
			last = s
		}
		if !slices.IsSorted(terms[i]) || len(slices.Compact(slices.Clone(terms[i]))) != len(terms[i]) {
			t.Errorf("observer on n%d: terms %v not each once in increasing order", i+1, terms[i])
		}
		for _, want := range []uint64{first.Term, second.Term, third.Term, fourth.Term} {
			if !slices.Contains(terms[i], want) {
				t.Errorf("observer on n%d never saw term %d: %v", i+1, want, terms[i])
			}
		}
		if i > 0 && !slices.Equal(terms[i], terms[0]) {
			t.Errorf("observers disagree: n1 saw terms %v, n%d saw %v", terms[0], i+1, terms[i])
		}
	}
	t.Logf("every observer saw terms %v", terms[0])
	// And the resource let through only writes that moved forward.
	log := rs.Accepted()[key]
	for i := 1; i < len(log); i++ {
		if !log[i-1].Admits(log[i]) && log[i-1] != (history.Stamp{}) {
			t.Errorf("the resource accepted %v after %v", log[i], log[i-1])
		}
	}
}

// acceptedAfter reports whether the resource accepted a write with token
// old after one with token newer.
func acceptedAfter(log []history.Stamp, old, newer uint64) bool {
	seen := false
	for _, st := range log {
		switch st.Token {
		case newer:
			seen = true
		case old:
			if seen {
				return true
			}
		}
	}
	return false
}

func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}
