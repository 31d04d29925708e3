package echosched

import (
	"net/http"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/servetest"
)

func TestRouteStats(t *testing.T) {
	servetest.CheckAdapterRouteStats(t, func(s *cpusched.Scheduler, block func()) http.Handler {
		limited := Middleware(s, httpsched.WithMaxQueueWait(time.Hour))
		ok := func(c echo.Context) error { return c.String(http.StatusOK, "ok") }
		e := echo.New()
		e.GET("/users/:id", func(c echo.Context) error { block(); return ok(c) }, limited)
		e.GET("/hello", ok, limited)
		e.GET("/never", ok, limited)
		e.POST("/users/:id", ok, Middleware(s))
		return e
	}, RouteStats)
}

func TestAutoRouteStats(t *testing.T) {
	servetest.CheckAutoRouteStats(t, func(s *cpusched.Scheduler, block func()) http.Handler {
		ok := func(c echo.Context) error { return c.String(http.StatusOK, "ok") }
		e := echo.New()
		e.Use(Auto(s, httpsched.WithMaxQueueWait(time.Hour)))
		e.GET("/users/:id", func(c echo.Context) error {
			servetest.Spin(3 * time.Millisecond)
			block()
			return ok(c)
		})
		e.GET("/hello", func(c echo.Context) error {
			servetest.Spin(3 * time.Millisecond)
			return ok(c)
		})
		e.GET("/light", ok)
		return e
	}, "GET /users/:id", "GET /hello", "GET /light")
}
