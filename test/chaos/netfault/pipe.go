package netfault

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// chunkSize is the most a pump reads at once; each read is one chunk for
// Delay's purposes.
const chunkSize = 32 << 10

// queueLen bounds the chunks a direction holds while delaying them. A full
// queue stops the reader, so a slow link pushes back on the sender as a real
// one would instead of buffering without limit.
const queueLen = 64

// pipe is one proxied connection: the client's conn to the link and the
// link's conn to the target, with a reader and a writer per direction.
type pipe struct {
	link    *Link
	client  net.Conn
	ctx     context.Context // cancelled by abort; bounds the dial
	cancel  context.CancelFunc
	damaged atomic.Bool // some bytes were dropped by CutOneWay

	mu       sync.Mutex
	upstream net.Conn // nil until dialed
	done     bool
}

type chunk struct {
	data []byte
	due  time.Time
}

func newPipe(l *Link, client net.Conn) *pipe {
	ctx, cancel := context.WithCancel(l.ctx)
	return &pipe{link: l, client: client, ctx: ctx, cancel: cancel}
}

// run dials the target and forwards until both directions have ended or the
// pipe is aborted.
func (p *pipe) run(target string) {
	d := net.Dialer{Timeout: dialTimeout}
	upstream, err := d.DialContext(p.ctx, "tcp", target)
	if err != nil {
		// The target is down; the client sees what it would have seen
		// dialing it directly, give or take the successful handshake.
		if p.ctx.Err() == nil {
			p.link.dialErrors.Add(1)
		}
		p.abort()
		return
	}
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		reset(upstream)
		return
	}
	p.upstream = upstream
	p.mu.Unlock()

	var wg sync.WaitGroup
	p.pump(&wg, Forward, p.client, upstream)
	p.pump(&wg, Backward, upstream, p.client)
	wg.Wait()
	p.finish(false)
}

// pump starts the reader and writer for one direction. The reader stamps
// each chunk with its due time and the writer delivers chunks in order no
// earlier than that, so Delay adds latency without serialising throughput.
func (p *pipe) pump(wg *sync.WaitGroup, dir Direction, src, dst net.Conn) {
	queue := make(chan chunk, queueLen)
	wg.Add(2)
	go func() {
		defer wg.Done()
		p.read(dir, src, queue)
	}()
	go func() {
		defer wg.Done()
		p.write(dir, dst, queue)
	}()
}

// read stamps what src sends with its due time and queues it, or drops it
// while dir is blackholed; it closes queue when src ends.
func (p *pipe) read(dir Direction, src net.Conn, queue chan<- chunk) {
	l := p.link
	defer close(queue)
	buf := make([]byte, chunkSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if l.drop[dir].Load() {
				p.damaged.Store(true)
				l.dropped[dir].Add(int64(n))
			} else {
				c := chunk{
					data: append([]byte(nil), buf[:n]...),
					due:  time.Now().Add(time.Duration(l.delay.Load())),
				}
				select {
				case queue <- c:
				case <-p.ctx.Done():
					return
				}
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				// A reset (or our own abort): pass it on to the other side.
				p.abort()
			}
			return
		}
	}
}

// write delivers the queued chunks to dst, each no earlier than it is due,
// then passes on the source's FIN.
func (p *pipe) write(dir Direction, dst net.Conn, queue <-chan chunk) {
	l := p.link
	for c := range queue {
		if wait := time.Until(c.due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-p.ctx.Done():
				t.Stop()
				return
			}
		}
		n, err := dst.Write(c.data)
		l.bytes[dir].Add(int64(n))
		if err != nil {
			p.abort()
			return
		}
	}
	// The source sent FIN. Pass it on, unless this direction is
	// blackholed, in which case the FIN is lost like everything else
	// and the stream is as damaged as if bytes had been dropped.
	if p.ctx.Err() != nil {
		return
	}
	if l.drop[dir].Load() {
		p.damaged.Store(true)
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// abort resets both sides of the pipe and unblocks its goroutines.
func (p *pipe) abort() { p.finish(true) }

// finish closes both sides once; rst chooses a reset over an orderly close.
func (p *pipe) finish(rst bool) {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	p.done = true
	upstream := p.upstream
	p.mu.Unlock()

	p.cancel()
	closeConn := net.Conn.Close
	if rst {
		closeConn = func(c net.Conn) error { reset(c); return nil }
	}
	_ = closeConn(p.client)
	if upstream != nil {
		_ = closeConn(upstream)
	}
	p.link.forget(p)
}
