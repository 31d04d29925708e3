package echosched

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

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/leakcheck"
	"github.com/cpusched/cpusched/internal/schedtest"
	"github.com/cpusched/cpusched/internal/servetest"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// seen is what the middleware before echosched's saw of a request: the
// error it returned and the status of echo's Response.
type seen struct {
	mu     sync.Mutex
	err    error
	status int
}

// newEcho returns an echo whose first middleware records into seen, as a
// logger middleware would.
func newEcho(sn *seen) *echo.Echo {
	e := echo.New()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := next(c)
			sn.mu.Lock()
			sn.err, sn.status = err, c.Response().Status
			sn.mu.Unlock()
			return err
		}
	})
	return e
}

// taskFound answers whether the handler found its task, both ways.
func taskFound(c echo.Context) error {
	return c.String(http.StatusOK, fmt.Sprint(TaskFrom(c) != nil, httpsched.TaskFrom(c.Request().Context()) != nil))
}

func TestTaskFrom(t *testing.T) {
	// A route has the task whether the middleware is the route's, its
	// group's or the whole echo's; one without it has none.
	s := schedtest.NewScheduler(t)
	e := echo.New()
	e.GET("/route", taskFound, Middleware(s))
	e.GET("/direct", taskFound)
	e.Group("/group", Middleware(s)).GET("/in", taskFound)
	all := echo.New()
	all.Use(Middleware(s))
	all.GET("/all", taskFound)
	tests := []struct {
		e    *echo.Echo
		path string
		want string
	}{
		{e, "/route", "true true"},
		{e, "/group/in", "true true"},
		{all, "/all", "true true"},
		{e, "/direct", "false false"},
	}
	for _, tt := range tests {
		servetest.Check(t, tt.path, servetest.Record(tt.e, "GET", tt.path), http.StatusOK, tt.want)
	}
}

func TestOneHandlerPerRoute(t *testing.T) {
	// A trial service: echo.WrapMiddleware around httpsched.Handler made a
	// handler for each request, whose WithMaxQueueWait limit had learned
	// nothing: it never shed. The middleware keeps one per route. With
	// the slot held, a burst to /a is shed beyond /a's limit, and /b,
	// through the same middleware, still gets its own places.
	s := schedtest.NewScheduler(t)
	e := echo.New()
	e.Use(Middleware(s, httpsched.WithMaxQueueWait(time.Hour)))
	ok := func(c echo.Context) error { return c.String(http.StatusOK, "ok") }
	e.GET("/a", ok)
	e.GET("/b", ok)
	shed, n503 := schedtest.ShedBurst(t, s, 40,
		func() int { return servetest.Record(e, "GET", "/a").Code },
		func() int { return servetest.Record(e, "GET", "/b").Code })
	if shed == 0 || n503 != shed || int(httpsched.Sheds(s).WaitLimit) != shed {
		t.Errorf("got %d of 40 requests shed at once, %d 503s, Sheds().WaitLimit %d; want some shed, each a 503 counted in WaitLimit",
			shed, n503, httpsched.Sheds(s).WaitLimit)
	}
}

func TestErrorHandledInsideTheTask(t *testing.T) {
	// A handler's error goes to echo's HTTPErrorHandler while the task
	// runs, through httpsched's writer; the middleware before sees it,
	// and echo writes nothing more (the response is committed).
	s := schedtest.NewScheduler(t)
	var sn seen
	e := newEcho(&sn)
	inTask := make(chan bool, 2)
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		inTask <- TaskFrom(c) != nil
		e.DefaultHTTPErrorHandler(err, c)
	}
	teapot := echo.NewHTTPError(http.StatusTeapot, "short and stout")
	e.GET("/teapot", func(c echo.Context) error { return teapot }, Middleware(s))
	e.GET("/plain", func(c echo.Context) error { return errors.New("plain") }, Middleware(s))

	servetest.Check(t, "/teapot", servetest.Record(e, "GET", "/teapot"), http.StatusTeapot, `{"message":"short and stout"}`)
	if got := <-inTask; !got || sn.err != teapot || sn.status != http.StatusTeapot {
		t.Errorf("/teapot: got handled in the task %v, before it %d %v; want true, %d %v", got, sn.status, sn.err, http.StatusTeapot, teapot)
	}
	servetest.Check(t, "/plain", servetest.Record(e, "GET", "/plain"), http.StatusInternalServerError, `{"message":"Internal Server Error"}`)
	if got := <-inTask; !got {
		t.Error("/plain: got the error handled outside the task, want inside")
	}
	if len(inTask) != 0 {
		t.Errorf("got the error handler run %d more times on an uncommitted response, want 0", len(inTask))
	}
}

func TestCutAnswers503(t *testing.T) {
	// Close cuts a running handler: what it returns for that (Checkpoint's
	// error as is or wrapped, the context's) is not echo's 500 but
	// httpsched's 503 with Retry-After, in echo's format. A status of the
	// handler's own, and an answer, stand.
	tests := []struct {
		what     string
		ret      func(c echo.Context, err error) error
		wantCode int
		wantBody string
	}{
		{"as is", func(_ echo.Context, err error) error { return err }, 503, `{"message":"Service Unavailable"}`},
		{"wrapped", func(_ echo.Context, err error) error { return fmt.Errorf("hashing: %w", err) }, 503, `{"message":"Service Unavailable"}`},
		{"context", func(c echo.Context, _ error) error { return c.Request().Context().Err() }, 503, `{"message":"Service Unavailable"}`},
		{"own", func(echo.Context, error) error { return echo.ErrBadGateway }, 502, `{"message":"Bad Gateway"}`},
		{"answer", func(c echo.Context, _ error) error { return c.String(http.StatusOK, "partial") }, 200, "partial"},
	}
	for _, tt := range tests {
		t.Run(tt.what, func(t *testing.T) {
			s := schedtest.NewScheduler(t)
			var sn seen
			e := newEcho(&sn)
			entered := make(chan struct{})
			e.GET("/", func(c echo.Context) error {
				close(entered)
				task := TaskFrom(c)
				err := task.Checkpoint()
				for ; err == nil; err = task.Checkpoint() {
				}
				return tt.ret(c, err)
			}, Middleware(s))
			got := make(chan *httptest.ResponseRecorder)
			go func() { got <- servetest.Record(e, "GET", "/") }()
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
			if tt.wantCode == 503 && !errors.Is(sn.err, cpusched.ErrClosed) {
				t.Errorf("got %v before the middleware, want an error whose cause is cpusched.ErrClosed", sn.err)
			}
		})
	}
}

func TestContextEndLeavesTheErrorToEcho(t *testing.T) {
	// When the request's context ends (a timeout middleware before
	// echosched's), the handler's context error is not handled inside
	// the task: echo's ContextTimeout turns it into its 503.
	s := schedtest.NewScheduler(t)
	e := echo.New()
	e.GET("/", func(c echo.Context) error {
		task := TaskFrom(c)
		err := task.Checkpoint()
		for ; err == nil; err = task.Checkpoint() {
		}
		return err
	}, middleware.ContextTimeout(50*time.Millisecond), Middleware(s))
	rec := servetest.Record(e, "GET", "/")
	if body := strings.TrimSpace(rec.Body.String()); rec.Code != http.StatusServiceUnavailable || body != `{"message":"Service Unavailable"}` || rec.Header().Get("Retry-After") != "" {
		t.Errorf("got %d %q Retry-After %q, want ContextTimeout's 503 (no Retry-After)", rec.Code, body, rec.Header().Get("Retry-After"))
	}
}

func TestShed(t *testing.T) {
	// httpsched's answers without running the chain go through echo's
	// HTTPErrorHandler with their cause, or through WithErrorHandler's.
	s := schedtest.NewScheduler(t)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var sn seen
	e := newEcho(&sn)
	ran := false
	h := func(c echo.Context) error { ran = true; return nil }
	e.GET("/echo", h, Middleware(s))
	e.GET("/own", h, Middleware(s, httpsched.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, status int, err error) {
		w.WriteHeader(status)
		fmt.Fprint(w, "own ", status)
	})))
	bad := func(*http.Request) ([]cpusched.TaskOption, error) { return nil, errors.New("no tenant") }
	e.GET("/bad", h, Middleware(s, httpsched.WithRequestTaskOptions(bad)))

	servetest.Check(t, "/echo", servetest.Record(e, "GET", "/echo"), http.StatusServiceUnavailable, `{"message":"Service Unavailable"}`)
	var he *echo.HTTPError
	if !errors.As(sn.err, &he) || he.Code != 503 || !errors.Is(sn.err, cpusched.ErrClosed) || sn.status != 503 {
		t.Errorf("/echo: got %d %v before the middleware, want 503 and an *echo.HTTPError 503 whose cause is cpusched.ErrClosed", sn.status, sn.err)
	}
	servetest.Check(t, "/own", servetest.Record(e, "GET", "/own"), http.StatusServiceUnavailable, "own 503")
	servetest.Check(t, "/bad", servetest.Record(e, "GET", "/bad"), http.StatusBadRequest, `{"message":"Bad Request"}`)
	if ran {
		t.Error("got the handler run, want it never run")
	}
}

func TestPanicAnswers500(t *testing.T) {
	s := schedtest.NewScheduler(t)
	var sn seen
	e := newEcho(&sn)
	e.GET("/", func(c echo.Context) error { panic("handler panics") },
		Middleware(s, httpsched.WithLogger(slog.New(slog.DiscardHandler))))
	servetest.Check(t, "panic", servetest.Record(e, "GET", "/"), http.StatusInternalServerError, `{"message":"Internal Server Error"}`)
	var pe *cpusched.PanicError
	if !errors.As(sn.err, &pe) || pe.Value != "handler panics" {
		t.Errorf("got %v before the middleware, want the *cpusched.PanicError", sn.err)
	}
}

func TestResponseWritersDoNotRecurse(t *testing.T) {
	// A trial service: pointing echo's Response.Writer at httpsched's writer,
	// which wrapped that Response, overflowed the stack in Header. Here
	// middleware on both sides replace the Response's Writer (Gzip before,
	// BodyDump after), and the handler sets a header, writes, flushes and
	// reaches the original writer with http.ResponseController.
	s := schedtest.NewScheduler(t)
	e := echo.New()
	dumped := make(chan string, 1)
	e.GET("/", func(c echo.Context) error {
		c.Response().Header().Set("X-Handler", "set")
		c.Response().WriteHeader(http.StatusOK)
		if _, err := c.Response().Write([]byte("hello")); err != nil {
			return err
		}
		c.Response().Flush()
		return http.NewResponseController(c.Response()).Flush()
	}, middleware.Gzip(), Middleware(s), middleware.BodyDump(func(_ echo.Context, _, body []byte) { dumped <- string(body) }))
	rec := servetest.Record(e, "GET", "/")
	servetest.Check(t, "writers", rec, http.StatusOK, "hello")
	if rec.Header().Get("X-Handler") != "set" || !rec.Flushed || <-dumped != "hello" {
		t.Errorf("got header %q, flushed %v, want \"set\", true, and the body dumped", rec.Header().Get("X-Handler"), rec.Flushed)
	}
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
