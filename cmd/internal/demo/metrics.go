package demo

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cpusched/cpusched/promsched"
)

// metricsHandler returns GET /metrics: the Prometheus text exposition of the
// server's scheduler (promsched's metrics) and of the Go runtime and the
// process. The registry is the server's own, not the global default one, so
// that two Servers in one process (as in tests) do not collide.
func (s *Server) metricsHandler() http.HandlerFunc {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		promsched.NewCollector(s.sched),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP
}
