package api

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fencer-io/fencer/internal/limits"
)

// requestMetrics records each request's duration by route pattern, method
// and status (by pattern, not path, so lock names do not explode the series).
type requestMetrics struct {
	duration *prometheus.HistogramVec
	handler  http.Handler

	// observers caches each series' histogram by chi's route patterns (as
	// matched, before RoutePattern joins and cleans them), method and
	// status: building the label and looking the series up cost 10
	// allocations a request. Patterns are the registered routes', not
	// paths, so the cache stays as small as the set of series.
	mu        sync.RWMutex
	observers map[seriesKey]prometheus.Observer
}

// seriesKey names a request's series before its labels are built.
type seriesKey struct {
	patterns string // chi's RoutePatterns, concatenated
	method   string
	status   int
}

func newRequestMetrics(reg *prometheus.Registry) *requestMetrics {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "fencer",
		Name:      "http_request_duration_seconds",
		Help:      "HTTP API request durations by route, method and status.",
		Buckets:   []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 60},
	}, []string{"route", "method", "status"})
	if err := reg.Register(h); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			panic(err)
		}
		h = are.ExistingCollector.(*prometheus.HistogramVec)
	}
	return &requestMetrics{duration: h, handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), observers: map[seriesKey]prometheus.Observer{}}
}

// held exports how many event streams and blocking reads the node holds
// open (their limits are WatchLimits).
func (m *requestMetrics) held(reg *prometheus.Registry, streams, blocking *limits.Held) {
	for _, g := range []struct {
		name, help string
		h          *limits.Held
	}{
		{"event_streams_open", "Event streams (GET /v1/events) open on this node.", streams},
		{"blocking_reads_open", "Blocking reads (GET /v1/locks/{name}?wait_index=) in progress on this node.", blocking},
	} {
		h := g.h
		err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "fencer", Name: g.name, Help: g.help},
			func() float64 { return float64(h.Open()) }))
		var are prometheus.AlreadyRegisteredError
		if err != nil && !errors.As(err, &are) {
			panic(err)
		}
	}
}

func (m *requestMetrics) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		m.observer(chi.RouteContext(r.Context()), methodLabel(r.Method), status).Observe(time.Since(start).Seconds())
	})
}

// methodLabel is a request's method as a label value: HTTP's own methods
// as they are, any other "other", so that a client sending made-up
// methods cannot grow the series (and the cache of them) without bound.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return "other"
}

// observer returns the histogram of a request's route, method and status.
func (m *requestMetrics) observer(rc *chi.Context, method string, status int) prometheus.Observer {
	var buf [128]byte
	patterns := buf[:0]
	if rc != nil {
		for _, p := range rc.RoutePatterns {
			patterns = append(patterns, p...)
		}
	}
	m.mu.RLock()
	o, ok := m.observers[seriesKey{string(patterns), method, status}] // converts without allocating
	m.mu.RUnlock()
	if ok {
		return o
	}
	route := "unmatched"
	if p := rc.RoutePattern(); p != "" {
		route = p
	}
	o = m.duration.WithLabelValues(route, method, strconv.Itoa(status))
	m.mu.Lock()
	m.observers[seriesKey{string(patterns), method, status}] = o
	m.mu.Unlock()
	return o
}
