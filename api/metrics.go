package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// requestMetrics records each request's duration by route pattern, method
// and status (by pattern, not path, so lock names do not explode the series).
type requestMetrics struct {
	duration *prometheus.HistogramVec
	handler  http.Handler
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
	return &requestMetrics{duration: h, handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
}

func (m *requestMetrics) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil {
			if p := rc.RoutePattern(); p != "" {
				route = p
			}
		}
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		m.duration.WithLabelValues(route, r.Method, strconv.Itoa(status)).Observe(time.Since(start).Seconds())
	})
}
