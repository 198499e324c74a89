package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fencer-io/fencer/fence/resource"
	"github.com/fencer-io/fencer/test/chaos/brokenfence"
	"github.com/fencer-io/fencer/test/chaos/history"
	"github.com/fencer-io/fencer/test/chaos/workload"
)

// ResourceOptions describe the external resource.
type ResourceOptions struct {
	Bin     string
	DataDir string
	Log     string
	// Broken, if set, serves the negative control instead: the resource
	// with these brokenfence modes, run by this (test) binary, whose
	// TestMain must hand over to brokenfence.Main when brokenfence.Env is
	// set.
	Broken string
	Group  *Group
}

// Resource is a `fencer resource serve` process behind a recording proxy.
type Resource struct {
	opts  ResourceOptions
	addr  string // the process's own address
	proc  *Proc
	proxy *http.Server
	url   string // the proxy's base URL, for clients

	mu       sync.Mutex
	keys     map[string]*sync.Mutex
	accepted map[string][]history.Stamp
}

// NewResource picks the resource's address and starts its proxy; Start
// starts the process.
func NewResource(opts ResourceOptions) (*Resource, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Resource{opts: opts, addr: addr, keys: map[string]*sync.Mutex{}, accepted: map[string][]history.Stamp{}}
	r.proxy = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 5 * time.Second}
	r.url = "http://" + l.Addr().String()
	go r.proxy.Serve(l)
	return r, nil
}

// URL is the base URL clients write through.
func (r *Resource) URL() string { return r.url }

// Start starts the resource process and waits until it answers.
func (r *Resource) Start(ctx context.Context) error {
	spec := Spec{Name: "resource", Path: r.opts.Bin, Log: r.opts.Log,
		Args: []string{"resource", "serve", "--data-dir", r.opts.DataDir, "--addr", r.addr}}
	if r.opts.Broken != "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		cfg, err := json.Marshal(brokenfence.Config{DataDir: r.opts.DataDir, Addr: r.addr, Mode: r.opts.Broken})
		if err != nil {
			return err
		}
		spec.Path, spec.Args, spec.Env = self, nil, []string{brokenfence.Env + "=" + string(cfg)}
	}
	p, err := r.opts.Group.Start(spec)
	if err != nil {
		return err
	}
	r.proc = p
	return poll(ctx, 50*time.Millisecond, func() (bool, error) {
		if !p.Running() {
			return false, errors.New("resource exited; see " + r.opts.Log)
		}
		return getJSON(ctx, r.addr, "/healthz", nil) == nil, nil
	})
}

// Kill SIGKILLs the resource process.
func (r *Resource) Kill() {
	if r.proc != nil {
		r.proc.Kill()
	}
}

// Running reports whether the resource process is up.
func (r *Resource) Running() bool { return r.proc != nil && r.proc.Running() }

// Close stops the proxy.
func (r *Resource) Close() error { return r.proxy.Close() }

// Accepted returns, per key, every write the resource accepted, in order.
func (r *Resource) Accepted() map[string][]history.Stamp {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]history.Stamp, len(r.accepted))
	for k, v := range r.accepted {
		out[k] = append([]history.Stamp(nil), v...)
	}
	return out
}

// FinalRead reads key from the resource itself.
func (r *Resource) FinalRead(ctx context.Context, key string) (history.FinalRead, error) {
	found, value, stamp, err := workload.GetResource(ctx, adminClient, "http://"+r.addr, key)
	if err != nil {
		return history.FinalRead{}, err
	}
	return history.FinalRead{Key: key, Found: found, Value: value, Token: stamp.Token, Seq: stamp.Seq}, nil
}

var upstream = &http.Client{Timeout: 5 * time.Second}

// serve forwards a request to the resource. Writes to one key go one at a
// time, so the order in which their answers arrive is the order in which
// the resource committed them, and the log of accepted marks is exact.
func (r *Resource) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	key, isWrite := strings.CutPrefix(req.URL.Path, "/v1/data/")
	isWrite = isWrite && req.Method == http.MethodPut
	if isWrite {
		mu := r.keyLock(key)
		mu.Lock()
		defer mu.Unlock()
	}
	// The upstream call outlives a client that gave up, so that a write the
	// resource commits is always logged.
	out, err := http.NewRequestWithContext(context.WithoutCancel(req.Context()), req.Method, "http://"+r.addr+req.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out.Header = req.Header.Clone()
	resp, err := upstream.Do(out)
	if err != nil {
		http.Error(w, "resource unreachable: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, "resource answer cut: "+err.Error(), http.StatusBadGateway)
		return
	}
	if isWrite && resp.StatusCode == http.StatusOK {
		var m resource.MarkResponse
		if err := json.Unmarshal(answer, &m); err == nil {
			r.mu.Lock()
			r.accepted[key] = append(r.accepted[key], history.Stamp{Token: m.Token, Seq: m.Seq})
			r.mu.Unlock()
		}
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

func (r *Resource) keyLock(key string) *sync.Mutex {
	r.mu.Lock()
	defer r.mu.Unlock()
	mu, ok := r.keys[key]
	if !ok {
		mu = &sync.Mutex{}
		r.keys[key] = mu
	}
	return mu
}
