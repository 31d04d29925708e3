package ginsched

import (
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/servetest"
)

func TestRouteStats(t *testing.T) {
	servetest.CheckAdapterRouteStats(t, func(s *cpusched.Scheduler, block func()) http.Handler {
		limited := Middleware(s, httpsched.WithMaxQueueWait(time.Hour))
		ok := func(c *gin.Context) { c.String(http.StatusOK, "ok") }
		r := gin.New()
		r.GET("/users/:id", limited, func(c *gin.Context) { block(); ok(c) })
		r.GET("/hello", limited, ok)
		r.GET("/never", limited, ok)
		r.POST("/users/:id", Middleware(s), ok)
		return r
	}, RouteStats)
}

func TestAutoRouteStats(t *testing.T) {
	servetest.CheckAutoRouteStats(t, func(s *cpusched.Scheduler, block func()) http.Handler {
		ok := func(c *gin.Context) { c.String(http.StatusOK, "ok") }
		r := gin.New()
		r.Use(Auto(s, httpsched.WithMaxQueueWait(time.Hour)))
		r.GET("/users/:id", func(c *gin.Context) {
			servetest.Spin(3 * time.Millisecond)
			block()
			ok(c)
		})
		r.GET("/hello", func(c *gin.Context) {
			servetest.Spin(3 * time.Millisecond)
			ok(c)
		})
		r.GET("/light", ok)
		return r
	}, "GET /users/:id", "GET /hello", "GET /light")
}
