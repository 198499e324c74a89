package limits

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// Defaults of ServerConfig. WriteTimeout covers the longest request the API
// serves: an acquire that queues for the maximum wait_ms (60 s) plus the
// request timeout (10 s), with room to spare.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 90 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxBodyBytes      = 1 << 20
)

// ServerConfig is the HTTP server's timeouts and size caps. Zero values mean
// the defaults.
type ServerConfig struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	MaxBodyBytes      int64
}

// Validate fills in defaults and checks the values.
func (c *ServerConfig) Validate() error {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&c.ReadTimeout, DefaultReadTimeout)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.IdleTimeout, DefaultIdleTimeout)
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.ReadHeaderTimeout < 0 || c.ReadTimeout < 0 || c.WriteTimeout < 0 || c.IdleTimeout < 0 || c.MaxHeaderBytes < 0 || c.MaxBodyBytes < 0 {
		return fmt.Errorf("http server limits must not be negative: %+v", *c)
	}
	return nil
}

// Apply sets the timeouts and the header cap on srv.
func (c ServerConfig) Apply(srv *http.Server) {
	srv.ReadHeaderTimeout = c.ReadHeaderTimeout
	srv.ReadTimeout = c.ReadTimeout
	srv.WriteTimeout = c.WriteTimeout
	srv.IdleTimeout = c.IdleTimeout
	srv.MaxHeaderBytes = c.MaxHeaderBytes
}

// MaxBody refuses a body announced larger than n with 413 body_too_large
// before any handler runs, and caps every body at n bytes, so a handler that
// reads more gets an error instead of the memory. Requests to the exempt
// paths (a snapshot restore: its body is the whole state) are left alone.
func MaxBody(n int64, exempt ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if slices.Contains(exempt, r.URL.Path) {
				next.ServeHTTP(w, r)
				return
			}
			if r.ContentLength > n {
				wire.WriteError(w, http.StatusRequestEntityTooLarge, &wire.Error{Code: wire.CodeBodyTooLarge,
					Message: fmt.Sprintf("request body of %d bytes exceeds %d", r.ContentLength, n)})
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, n)
			next.ServeHTTP(w, r)
		})
	}
}
