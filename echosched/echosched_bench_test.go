package echosched

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
)

// The middleware's cost per request of an empty handler, against the same
// route without it (BenchmarkEchoDirect) and with httpsched.Handler
// wrapped by echo.WrapHandler, which gives the handler no echo.Context
// (BenchmarkHTTPSchedHandler). IsolationNone with one slot, serial: the
// numbers are about the adapter, not the scheduler.

func benchEcho(b *testing.B, route func(e *echo.Echo, s *cpusched.Scheduler)) {
	s, err := cpusched.New(cpusched.WithIsolation(cpusched.IsolationNone), cpusched.WithWorkers(1))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(context.Background()) })
	e := echo.New()
	route(e, s)
	r := httptest.NewRequest("GET", "/", nil)
	b.ReportAllocs()
	for b.Loop() {
		e.ServeHTTP(httptest.NewRecorder(), r)
	}
}

func emptyHandler(echo.Context) error { return nil }

func BenchmarkEchoDirect(b *testing.B) {
	benchEcho(b, func(e *echo.Echo, _ *cpusched.Scheduler) { e.GET("/", emptyHandler) })
}

func BenchmarkHTTPSchedHandler(b *testing.B) {
	benchEcho(b, func(e *echo.Echo, s *cpusched.Scheduler) {
		e.GET("/", echo.WrapHandler(httpsched.Handler(s, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))))
	})
}

func BenchmarkMiddleware(b *testing.B) {
	benchEcho(b, func(e *echo.Echo, s *cpusched.Scheduler) { e.GET("/", emptyHandler, Middleware(s)) })
}

// Auto's cost on a light route's request, once classified: against
// BenchmarkEchoDirect and the same route behind a middleware of the
// whole echo that only calls next (BenchmarkEchoUse), whose closure echo
// allocates for each request as it does Auto's.

func BenchmarkEchoUse(b *testing.B) {
	benchEcho(b, func(e *echo.Echo, _ *cpusched.Scheduler) {
		e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error { return next(c) }
		})
		e.GET("/", emptyHandler)
	})
}

func BenchmarkAutoLight(b *testing.B) {
	benchEcho(b, func(e *echo.Echo, s *cpusched.Scheduler) {
		e.Use(Auto(s))
		e.GET("/", emptyHandler)
		for range 100 { // past the route's first samples
			e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		}
	})
}
