package echosched_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/echosched"
	"github.com/cpusched/cpusched/httpsched"
)

// Example runs one echo route as tasks that yield at every Checkpoint,
// shed past 100ms of queueing, while another route runs as it is.
func Example() {
	s, err := cpusched.New(cpusched.WithWorkers(1))
	if err != nil {
		panic(err)
	}
	defer s.Close(context.Background())

	e := echo.New()
	e.GET("/hello", func(c echo.Context) error { return c.String(http.StatusOK, "hello") })
	e.GET("/sum", func(c echo.Context) error {
		task := echosched.TaskFrom(c)
		total := 0
		for i := range 1_000_000 {
			total += i
			if err := task.Checkpoint(); err != nil {
				return err // cut by Close or Shutdown: 503
			}
		}
		return c.String(http.StatusOK, fmt.Sprint(total))
	}, echosched.Middleware(s, httpsched.WithMaxQueueWait(100*time.Millisecond)))

	for _, path := range []string{"/hello", "/sum"} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		fmt.Println(path, rec.Code, rec.Body)
	}
	// Output:
	// /hello 200 hello
	// /sum 200 499999500000
}
