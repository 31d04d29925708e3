package echosched

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/autoroute"
	"github.com/cpusched/cpusched/internal/schedtest"
	"github.com/cpusched/cpusched/internal/servetest"
)

// autoEcho is an echo with Auto of s and opts for all its routes: a heavy
// one (/heavy computes 3 ms), a light one and one that waits 5 ms and
// computes nothing; each answers whether its request ran as a task.
func autoEcho(s *cpusched.Scheduler, opts ...httpsched.Option) *echo.Echo {
	answer := func(c echo.Context) error {
		if httpsched.TaskFrom(c.Request().Context()) != nil {
			return c.String(http.StatusOK, "task")
		}
		return c.String(http.StatusOK, "direct")
	}
	e := echo.New()
	e.Use(Auto(s, opts...))
	e.GET("/heavy", func(c echo.Context) error {
		servetest.Spin(3 * time.Millisecond)
		return answer(c)
	})
	e.GET("/light", answer)
	e.GET("/wait/:id", func(c echo.Context) error {
		time.Sleep(5 * time.Millisecond)
		if c.Param("id") == "" {
			return echo.NewHTTPError(http.StatusBadRequest, "no id")
		}
		return answer(c)
	})
	return e
}

func TestAutoFindsHeavyRoutes(t *testing.T) {
	servetest.CheckAuto(t, func(s *cpusched.Scheduler) http.Handler { return autoEcho(s) }, "GET /heavy", "GET /light", "GET /wait/:id")
}

func TestAutoIdleRelease(t *testing.T) {
	servetest.CheckAutoIdleRelease(t, func(s *cpusched.Scheduler) http.Handler {
		e := echo.New()
		e.Use(Auto(s))
		e.GET("/work", echo.WrapHandler(http.HandlerFunc(servetest.Work)))
		return e
	})
}

func TestAutoRouteTurnsHeavy(t *testing.T) {
	servetest.CheckAutoTurnsHeavy(t, func(s *cpusched.Scheduler, cost *atomic.Int64, opts ...httpsched.Option) http.Handler {
		e := echo.New()
		e.Use(Auto(s, opts...))
		e.GET("/work", func(c echo.Context) error {
			servetest.Spin(time.Duration(cost.Load()))
			return c.NoContent(http.StatusOK)
		})
		return e
	})
}

func TestAutoRouteNames(t *testing.T) {
	// A route is its method and template; a request no route matched is
	// the route "", whatever its method and path, and one of a method
	// that is not net/http's its template alone (echo answers 405).
	servetest.CheckAutoRouteNames(t, func(s *cpusched.Scheduler, opts ...httpsched.Option) http.Handler {
		return autoEcho(s, opts...)
	}, "GET /wait/:id,,GET /light,/light")
}

func TestAutoHeavyRouteTakesTheOptions(t *testing.T) {
	// A heavy route's requests go through a handler with Auto's other
	// options, and its answers through echo's HTTPErrorHandler, as
	// Middleware's: once s is closed, /heavy is answered 503 with
	// WithRetryAfter's header, in echo's format; /light is still served.
	if !autoroute.Measurable() {
		t.Skip("no thread CPU clocks: every route stays light")
	}
	s := schedtest.NewScheduler(t)
	e := autoEcho(s, httpsched.WithRetryAfter(7*time.Second))
	for range 2 {
		servetest.Record(e, "GET", "/heavy")
	}
	if !servetest.AutoRoute(t, s, "GET /heavy").Heavy {
		t.Fatal("GET /heavy is not heavy after 2 requests")
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := servetest.Record(e, "GET", "/heavy")
	if got := strings.TrimSpace(rec.Body.String()); rec.Code != http.StatusServiceUnavailable || got != `{"message":"Service Unavailable"}` || rec.Header().Get("Retry-After") != "7" {
		t.Errorf("/heavy after Close: got %d %q, Retry-After %q; want 503 %q, 7", rec.Code, got, rec.Header().Get("Retry-After"), `{"message":"Service Unavailable"}`)
	}
	servetest.Check(t, "/light after Close", servetest.Record(e, "GET", "/light"), http.StatusOK, "direct")
}

// TestAutoOnAGroupBesideMiddleware: the way Auto's doc gives a route a
// WithMaxQueueWait target of its own, Auto on a group and that route on
// the echo itself with Middleware.
func TestAutoOnAGroupBesideMiddleware(t *testing.T) {
	servetest.CheckAutoBesideMiddleware(t, func(s *cpusched.Scheduler) http.Handler {
		answer := func(c echo.Context) error {
			if TaskFrom(c) != nil {
				return c.String(http.StatusOK, "task")
			}
			return c.String(http.StatusOK, "direct")
		}
		e := echo.New()
		e.GET("/login", answer, Middleware(s, httpsched.WithMaxQueueWait(250*time.Millisecond)))
		g := e.Group("", Auto(s, httpsched.WithMaxQueueWait(20*time.Millisecond)))
		g.GET("/render", answer)
		return e
	}, RouteStats)
}

func TestAutoLightLoadHeader(t *testing.T) {
	// A light route's response carries the load report, as a heavy one's.
	s := schedtest.NewScheduler(t)
	rec := servetest.Record(autoEcho(s, httpsched.WithLoadMetricsHeader()), "GET", "/light")
	servetest.Check(t, "/light", rec, http.StatusOK, "direct")
	if rec.Header().Get("Endpoint-Load-Metrics") == "" {
		t.Error("/light with WithLoadMetricsHeader: no Endpoint-Load-Metrics header")
	}
}

func TestNewAutoErrors(t *testing.T) {
	servetest.CheckAutoErrors(t, schedtest.NewScheduler(t), func(s *cpusched.Scheduler, opts ...httpsched.Option) (bool, error) {
		mw, err := NewAuto(s, opts...)
		return mw != nil, err
	})
	defer func() {
		if recover() == nil {
			t.Error("Auto(nil): got no panic, want one")
		}
	}()
	Auto(nil)
}
