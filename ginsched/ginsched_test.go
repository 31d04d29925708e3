package ginsched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/leakcheck"
	"github.com/cpusched/cpusched/internal/schedtest"
	"github.com/cpusched/cpusched/internal/servetest"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	leakcheck.VerifyTestMain(m)
}

// seen is what the middleware before ginsched's saw of a request after
// it: c.Errors, the status of gin's writer and whether it was aborted.
type seen struct {
	mu      sync.Mutex
	errs    []error
	status  int
	aborted bool
}

// newEngine returns a gin engine whose first middleware records into sn,
// as gin's Logger would.
func newEngine(sn *seen) *gin.Engine {
	r := gin.New()
	r.Use(func(c *gin.Context) {
		c.Next()
		sn.mu.Lock()
		defer sn.mu.Unlock()
		sn.errs = sn.errs[:0]
		for _, e := range c.Errors {
			sn.errs = append(sn.errs, e.Err)
		}
		sn.status, sn.aborted = c.Writer.Status(), c.IsAborted()
	})
	return r
}

// taskFound answers whether the handler found its task, both ways.
func taskFound(c *gin.Context) {
	c.String(http.StatusOK, fmt.Sprint(TaskFrom(c) != nil, httpsched.TaskFrom(c.Request.Context()) != nil))
}

func TestTaskFrom(t *testing.T) {
	// A route has the task whether the middleware is the route's, its
	// group's or the whole engine's; one without it has none, nor has a
	// test context.
	s := schedtest.NewScheduler(t)
	r := gin.New()
	r.GET("/route", Middleware(s), taskFound)
	r.GET("/direct", taskFound)
	r.Group("/group", Middleware(s)).GET("/in", taskFound)
	all := gin.New()
	all.Use(Middleware(s))
	all.GET("/all", taskFound)
	tests := []struct {
		r    *gin.Engine
		path string
		want string
	}{
		{r, "/route", "true true"},
		{r, "/group/in", "true true"},
		{all, "/all", "true true"},
		{r, "/direct", "false false"},
	}
	for _, tt := range tests {
		servetest.Check(t, tt.path, servetest.Record(tt.r, "GET", tt.path), http.StatusOK, tt.want)
	}
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest("GET", "/", nil)
	if TaskFrom(c) != nil {
		t.Error("got a task in a test context, want nil")
	}
}

func TestOneHandlerPerRoute(t *testing.T) {
	// One middleware for the whole engine keeps a handler per route, so
	// that WithMaxQueueWait's limit is each route's (a trial service: a handler
	// made per request never shed). With the slot held, a burst to /a is
	// shed beyond /a's limit, and /b still gets its own places.
	s := schedtest.NewScheduler(t)
	r := gin.New()
	r.Use(Middleware(s, httpsched.WithMaxQueueWait(time.Hour)))
	ok := func(c *gin.Context) { c.String(http.StatusOK, "ok") }
	r.GET("/a", ok)
	r.GET("/b", ok)
	shed, n503 := schedtest.ShedBurst(t, s, 40,
		func() int { return servetest.Record(r, "GET", "/a").Code },
		func() int { return servetest.Record(r, "GET", "/b").Code })
	if shed == 0 || n503 != shed || int(httpsched.Sheds(s).WaitLimit) != shed {
		t.Errorf("got %d of 40 requests shed at once, %d 503s, Sheds().WaitLimit %d; want some shed, each a 503 counted in WaitLimit",
			shed, n503, httpsched.Sheds(s).WaitLimit)
	}
}

func TestAbortInsideTheTask(t *testing.T) {
	// An abort's status is written while the task runs, through
	// httpsched's writer: a cut after it leaves it as it is. A status set
	// and not sent is gin's to send after the chain.
	s := schedtest.NewScheduler(t)
	var sn seen
	r := newEngine(&sn)
	sentInTask := make(chan bool, 1)
	r.GET("/abort", Middleware(s), func(c *gin.Context) {
		c.AbortWithError(http.StatusTeapot, errors.New("short and stout"))
		sentInTask <- c.Writer.Written() && TaskFrom(c) != nil
	}, func(c *gin.Context) { t.Error("got the handler after the abort run") })
	r.GET("/status", Middleware(s), func(c *gin.Context) { c.Status(http.StatusAccepted) })

	servetest.Check(t, "/abort", servetest.Record(r, "GET", "/abort"), http.StatusTeapot, "")
	if !<-sentInTask || len(sn.errs) != 1 || sn.errs[0].Error() != "short and stout" || sn.status != http.StatusTeapot {
		t.Errorf("/abort: got before the middleware %d %v, want 418 and the error, sent inside the task", sn.status, sn.errs)
	}
	servetest.Check(t, "/status", servetest.Record(r, "GET", "/status"), http.StatusAccepted, "")
}

func TestCutAnswers503(t *testing.T) {
	// Close cuts a running handler: one that records Checkpoint's error,
	// or just returns, is answered httpsched's 503 with Retry-After, with
	// the cause in c.Errors; a status of the handler's own, and an
	// answer, stand.
	tests := []struct {
		what     string
		then     func(c *gin.Context, err error)
		wantCode int
		wantBody string
	}{
		{"error", func(c *gin.Context, err error) { c.Error(err) }, 503, "Service Unavailable"},
		{"return", func(*gin.Context, error) {}, 503, "Service Unavailable"},
		{"abort", func(c *gin.Context, _ error) { c.Abort() }, 503, "Service Unavailable"},
		{"own", func(c *gin.Context, err error) { c.AbortWithError(http.StatusBadGateway, err) }, 502, ""},
		{"answer", func(c *gin.Context, _ error) { c.String(http.StatusOK, "partial") }, 200, "partial"},
	}
	for _, tt := range tests {
		t.Run(tt.what, func(t *testing.T) {
			s := schedtest.NewScheduler(t)
			var sn seen
			r := newEngine(&sn)
			entered := make(chan struct{})
			r.GET("/", Middleware(s), func(c *gin.Context) {
				close(entered)
				task := TaskFrom(c)
				err := task.Checkpoint()
				for ; err == nil; err = task.Checkpoint() {
				}
				tt.then(c, err)
			})
			got := make(chan *httptest.ResponseRecorder)
			go func() { got <- servetest.Record(r, "GET", "/") }()
			<-entered
			cancelled, cancel := context.WithCancel(context.Background())
			cancel()
			if err := s.Close(cancelled); err != context.Canceled {
				t.Fatalf("Close: got %v, want context.Canceled (it gives up at once)", err)
			}
			servetest.Check(t, tt.what, <-got, tt.wantCode, tt.wantBody)
			if sn.status != tt.wantCode {
				t.Errorf("got status %d before the middleware, want %d", sn.status, tt.wantCode)
			}
			if tt.wantCode == 503 && (len(sn.errs) == 0 || !errors.Is(sn.errs[len(sn.errs)-1], cpusched.ErrClosed)) {
				t.Errorf("got c.Errors %v, want cpusched.ErrClosed last", sn.errs)
			}
		})
	}
}

func TestShed(t *testing.T) {
	// httpsched's answers without running the chain abort it, and add
	// their cause to c.Errors, or go through WithErrorHandler's function.
	s := schedtest.NewScheduler(t)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var sn seen
	r := newEngine(&sn)
	h := func(c *gin.Context) { t.Error("got the handler run, want it never run") }
	r.GET("/gin", Middleware(s), h)
	r.GET("/own", Middleware(s, httpsched.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, status int, err error) {
		w.WriteHeader(status)
		fmt.Fprint(w, "own ", status)
	})), h)
	bad := func(*http.Request) ([]cpusched.TaskOption, error) { return nil, errors.New("no tenant") }
	r.GET("/bad", Middleware(s, httpsched.WithRequestTaskOptions(bad)), h)

	servetest.Check(t, "/gin", servetest.Record(r, "GET", "/gin"), http.StatusServiceUnavailable, "Service Unavailable")
	if len(sn.errs) != 1 || !errors.Is(sn.errs[0], cpusched.ErrClosed) || sn.status != 503 || !sn.aborted {
		t.Errorf("/gin: got before the middleware %d %v aborted %v, want 503 [cpusched.ErrClosed] aborted", sn.status, sn.errs, sn.aborted)
	}
	servetest.Check(t, "/own", servetest.Record(r, "GET", "/own"), http.StatusServiceUnavailable, "own 503")
	if !sn.aborted {
		t.Error("/own: got the chain not aborted, want it aborted")
	}
	servetest.Check(t, "/bad", servetest.Record(r, "GET", "/bad"), http.StatusBadRequest, "Bad Request")
	if len(sn.errs) != 1 || sn.errs[0].Error() != "no tenant" {
		t.Errorf("/bad: got c.Errors %v, want [no tenant]", sn.errs)
	}
}

func TestPanicAnswers500(t *testing.T) {
	s := schedtest.NewScheduler(t)
	var sn seen
	r := newEngine(&sn)
	r.GET("/", Middleware(s, httpsched.WithLogger(slog.New(slog.DiscardHandler))), func(c *gin.Context) { panic("handler panics") })
	servetest.Check(t, "panic", servetest.Record(r, "GET", "/"), http.StatusInternalServerError, "Internal Server Error")
	var pe *cpusched.PanicError
	if len(sn.errs) != 1 || !errors.As(sn.errs[0], &pe) || pe.Value != "handler panics" {
		t.Errorf("got c.Errors %v, want the *cpusched.PanicError", sn.errs)
	}
}

func TestResponseWriters(t *testing.T) {
	// The handler's writer sets headers, writes strings and bytes, flushes
	// and reaches the original with http.ResponseController; a middleware
	// after this one that wraps c.Writer (as gzip's do) writes through it.
	s := schedtest.NewScheduler(t)
	r := gin.New()
	r.GET("/", Middleware(s, httpsched.WithLoadMetricsHeader()), func(c *gin.Context) {
		c.Writer = &upper{c.Writer}
		c.Next()
	}, func(c *gin.Context) {
		c.Header("X-Handler", "set")
		c.Writer.WriteString("hello, ")
		c.Writer.Flush()
		c.Writer.Write([]byte("world"))
		if err := http.NewResponseController(c.Writer).Flush(); err != nil {
			t.Errorf("ResponseController.Flush: %v", err)
		}
	})
	rec := servetest.Record(r, "GET", "/")
	servetest.Check(t, "writers", rec, http.StatusOK, "HELLO, WORLD")
	if rec.Header().Get("X-Handler") != "set" || !rec.Flushed || rec.Header().Get("Endpoint-Load-Metrics") == "" {
		t.Errorf("got X-Handler %q, flushed %v, load header %q; want \"set\", true and a load header",
			rec.Header().Get("X-Handler"), rec.Flushed, rec.Header().Get("Endpoint-Load-Metrics"))
	}
}

// upper is a middleware's c.Writer that upper-cases what is written.
type upper struct{ gin.ResponseWriter }

func (w *upper) Write(b []byte) (int, error) {
	return w.ResponseWriter.Write([]byte(strings.ToUpper(string(b))))
}

func (w *upper) WriteString(s string) (int, error) {
	return w.ResponseWriter.WriteString(strings.ToUpper(s))
}

func TestNewMiddlewareErrors(t *testing.T) {
	// httpsched.NewHandler's errors (routesched's tests check them); a nil
	// scheduler is one.
	if mw, err := NewMiddleware(nil); mw != nil || err == nil || !strings.Contains(err.Error(), "scheduler is nil") {
		t.Errorf("NewMiddleware(nil): got %v, want no middleware and an error naming the scheduler", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("Middleware(nil): got no panic, want one")
		}
	}()
	Middleware(nil)
}
