package ginsched

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/autoroute"
	"github.com/cpusched/cpusched/internal/schedtest"
	"github.com/cpusched/cpusched/internal/servetest"
)

// autoEngine returns r with Auto of s and opts for all its routes: a
// heavy one (/heavy computes 3 ms), a light one and one that waits 5 ms
// and computes nothing; each answers whether its request ran as a task.
func autoEngine(r *gin.Engine, s *cpusched.Scheduler, opts ...httpsched.Option) *gin.Engine {
	answer := func(c *gin.Context) {
		if httpsched.TaskFrom(c.Request.Context()) != nil {
			c.String(http.StatusOK, "task")
		} else {
			c.String(http.StatusOK, "direct")
		}
	}
	r.Use(Auto(s, opts...))
	r.GET("/heavy", func(c *gin.Context) {
		servetest.Spin(3 * time.Millisecond)
		answer(c)
	})
	r.GET("/light", answer)
	r.GET("/wait/:id", func(c *gin.Context) {
		time.Sleep(5 * time.Millisecond)
		if c.Param("id") == "" {
			c.String(http.StatusBadRequest, "no id")
			return
		}
		answer(c)
	})
	return r
}

func TestAutoFindsHeavyRoutes(t *testing.T) {
	servetest.CheckAuto(t, func(s *cpusched.Scheduler) http.Handler { return autoEngine(gin.New(), s) }, "GET /heavy", "GET /light", "GET /wait/:id")
}

func TestAutoIdleRelease(t *testing.T) {
	servetest.CheckAutoIdleRelease(t, func(s *cpusched.Scheduler) http.Handler {
		r := gin.New()
		r.Use(Auto(s))
		r.GET("/work", gin.WrapF(servetest.Work))
		return r
	})
}

func TestAutoRouteTurnsHeavy(t *testing.T) {
	servetest.CheckAutoTurnsHeavy(t, func(s *cpusched.Scheduler, cost *atomic.Int64, opts ...httpsched.Option) http.Handler {
		r := gin.New()
		r.Use(Auto(s, opts...))
		r.GET("/work", func(c *gin.Context) {
			servetest.Spin(time.Duration(cost.Load()))
			c.Status(http.StatusOK)
		})
		return r
	})
}

func TestAutoRouteNames(t *testing.T) {
	// A route is its method and template; a request no route matched is
	// the route "", whatever its method and path (gin answers 404).
	servetest.CheckAutoRouteNames(t, func(s *cpusched.Scheduler, opts ...httpsched.Option) http.Handler {
		return autoEngine(gin.New(), s, opts...)
	}, "GET /wait/:id,,GET /light")
}

func TestAutoHeavyRouteTakesTheOptions(t *testing.T) {
	// A heavy route's requests go through a handler with Auto's other
	// options, and its answers' causes go to c.Errors, as Middleware's:
	// once s is closed, /heavy is answered 503 with WithRetryAfter's
	// header and cpusched.ErrClosed in c.Errors; /light is still served.
	if !autoroute.Measurable() {
		t.Skip("no thread CPU clocks: every route stays light")
	}
	s := schedtest.NewScheduler(t)
	var sn seen
	r := autoEngine(newEngine(&sn), s, httpsched.WithRetryAfter(7*time.Second))
	for range 2 {
		servetest.Record(r, "GET", "/heavy")
	}
	if !servetest.AutoRoute(t, s, "GET /heavy").Heavy {
		t.Fatal("GET /heavy is not heavy after 2 requests")
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := servetest.Record(r, "GET", "/heavy")
	if got := strings.TrimSpace(rec.Body.String()); rec.Code != http.StatusServiceUnavailable || got != "Service Unavailable" || rec.Header().Get("Retry-After") != "7" {
		t.Errorf("/heavy after Close: got %d %q, Retry-After %q; want 503 %q, 7", rec.Code, got, rec.Header().Get("Retry-After"), "Service Unavailable")
	}
	sn.mu.Lock()
	if len(sn.errs) != 1 || !errors.Is(sn.errs[0], cpusched.ErrClosed) || !sn.aborted {
		t.Errorf("c.Errors %v, aborted %v; want cpusched.ErrClosed, aborted", sn.errs, sn.aborted)
	}
	sn.mu.Unlock()
	servetest.Check(t, "/light after Close", servetest.Record(r, "GET", "/light"), http.StatusOK, "direct")
}

// TestAutoOnAGroupBesideMiddleware: the way Auto's doc gives a route a
// WithMaxQueueWait target of its own, Auto on a group and that route on
// the engine itself with Middleware.
func TestAutoOnAGroupBesideMiddleware(t *testing.T) {
	servetest.CheckAutoBesideMiddleware(t, func(s *cpusched.Scheduler) http.Handler {
		answer := func(c *gin.Context) {
			if TaskFrom(c) != nil {
				c.String(http.StatusOK, "task")
			} else {
				c.String(http.StatusOK, "direct")
			}
		}
		r := gin.New()
		r.GET("/login", Middleware(s, httpsched.WithMaxQueueWait(250*time.Millisecond)), answer)
		g := r.Group("/", Auto(s, httpsched.WithMaxQueueWait(20*time.Millisecond)))
		g.GET("/render", answer)
		return r
	}, RouteStats)
}

func TestAutoLightLoadHeader(t *testing.T) {
	// A light route's response carries the load report, as a heavy one's.
	s := schedtest.NewScheduler(t)
	rec := servetest.Record(autoEngine(gin.New(), s, httpsched.WithLoadMetricsHeader()), "GET", "/light")
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
