package ginsched

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
)

// The middleware's cost per request of an empty handler, against the same
// route without it (BenchmarkGinDirect) and with httpsched.Handler
// wrapped by gin.WrapH, which gives the handler no gin.Context
// (BenchmarkHTTPSchedHandler). IsolationNone with one slot, serial: the
// numbers are about the adapter, not the scheduler.

func benchGin(b *testing.B, route func(r *gin.Engine, s *cpusched.Scheduler)) {
	s, err := cpusched.New(cpusched.WithIsolation(cpusched.IsolationNone), cpusched.WithWorkers(1))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(context.Background()) })
	r := gin.New()
	route(r, s)
	req := httptest.NewRequest("GET", "/", nil)
	b.ReportAllocs()
	for b.Loop() {
		r.ServeHTTP(httptest.NewRecorder(), req)
	}
}

func emptyHandler(*gin.Context) {}

func BenchmarkGinDirect(b *testing.B) {
	benchGin(b, func(r *gin.Engine, _ *cpusched.Scheduler) { r.GET("/", emptyHandler) })
}

func BenchmarkHTTPSchedHandler(b *testing.B) {
	benchGin(b, func(r *gin.Engine, s *cpusched.Scheduler) {
		r.GET("/", gin.WrapH(httpsched.Handler(s, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))))
	})
}

func BenchmarkMiddleware(b *testing.B) {
	benchGin(b, func(r *gin.Engine, s *cpusched.Scheduler) { r.GET("/", Middleware(s), emptyHandler) })
}

// Auto's cost on a light route's request, once classified: against
// BenchmarkGinDirect and the same route behind a middleware of the whole
// engine that only calls c.Next (BenchmarkGinUse).

func BenchmarkGinUse(b *testing.B) {
	benchGin(b, func(r *gin.Engine, _ *cpusched.Scheduler) {
		r.Use(func(c *gin.Context) { c.Next() })
		r.GET("/", emptyHandler)
	})
}

func BenchmarkAutoLight(b *testing.B) {
	benchGin(b, func(r *gin.Engine, s *cpusched.Scheduler) {
		r.Use(Auto(s))
		r.GET("/", emptyHandler)
		for range 100 { // past the route's first samples
			r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		}
	})
}
