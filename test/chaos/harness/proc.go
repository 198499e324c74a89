package harness

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Spec describes a process to start.
type Spec struct {
	Name string
	Path string
	Args []string
	Env  []string // added to the harness's environment
	// Log receives stderr, and stdout unless Lines is set. It is appended
	// to, so that every incarnation of a node shares one file.
	Log string
	// Lines, if set, receives stdout line by line.
	Lines func([]byte)
	// Stdin keeps a pipe to the process's stdin, for CloseStdin.
	Stdin bool
}

// Proc is a started process.
type Proc struct {
	spec  Spec
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
	err   error // the exit status, once done is closed
}

// Group starts processes and remembers them, so that KillAll can end every
// one of them by pid.
type Group struct {
	mu    sync.Mutex
	procs []*Proc
}

// Start starts a process described by spec.
func (g *Group) Start(spec Spec) (*Proc, error) {
	logf, err := os.OpenFile(spec.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "=== %s: %s %s\n", time.Now().Format(time.RFC3339Nano), spec.Path, strings.Join(spec.Args, " "))
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stderr = logf
	// Die with the harness, even if it is killed before its cleanup runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &Proc{spec: spec, cmd: cmd, done: make(chan struct{})}
	var stdout io.ReadCloser
	if spec.Lines != nil {
		if stdout, err = cmd.StdoutPipe(); err != nil {
			logf.Close()
			return nil, err
		}
	} else {
		cmd.Stdout = logf
	}
	if spec.Stdin {
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			logf.Close()
			return nil, err
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	g.procs = append(g.procs, p)
	go func() {
		if stdout != nil {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 64<<10), 4<<20)
			for sc.Scan() {
				spec.Lines(sc.Bytes())
			}
		}
		p.err = cmd.Wait()
		fmt.Fprintf(logf, "=== %s: exited: %v\n", time.Now().Format(time.RFC3339Nano), exitText(p.err))
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// KillAll kills every process the group started that is still running,
// and waits for each to be reaped.
func (g *Group) KillAll() {
	g.mu.Lock()
	procs := append([]*Proc(nil), g.procs...)
	g.mu.Unlock()
	for _, p := range procs {
		p.Kill()
	}
}

// Running returns the processes the group started that are still running.
func (g *Group) Running() []*Proc {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*Proc
	for _, p := range g.procs {
		if p.Running() {
			out = append(out, p)
		}
	}
	return out
}

func exitText(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

// Name is the process's name in logs and reports.
func (p *Proc) Name() string { return p.spec.Name }

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Running reports whether the process has not exited yet.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// ExitErr is the process's exit status (nil for status 0); valid once Done
// is closed.
func (p *Proc) ExitErr() error {
	<-p.done
	return p.err
}

// Kill sends SIGKILL (which also ends a stopped process) and waits until
// the process is reaped.
func (p *Proc) Kill() {
	if !p.Running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Pause stops the process with SIGSTOP.
func (p *Proc) Pause() error { return p.signal(syscall.SIGSTOP) }

// Resume continues a stopped process with SIGCONT.
func (p *Proc) Resume() error { return p.signal(syscall.SIGCONT) }

// Terminate sends SIGTERM.
func (p *Proc) Terminate() error { return p.signal(syscall.SIGTERM) }

func (p *Proc) signal(sig syscall.Signal) error {
	if !p.Running() {
		return fmt.Errorf("%s: not running", p.spec.Name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: %v: %w", p.spec.Name, sig, err)
	}
	return nil
}

// CloseStdin closes the process's stdin (Spec.Stdin), which tells a chaos
// client to finish its iteration and exit.
func (p *Proc) CloseStdin() error {
	if p.stdin == nil {
		return fmt.Errorf("%s: no stdin pipe", p.spec.Name)
	}
	return p.stdin.Close()
}

// WaitExit waits up to timeout for the process to exit, reporting whether
// it did.
func (p *Proc) WaitExit(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}
