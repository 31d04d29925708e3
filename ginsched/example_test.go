package ginsched_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/ginsched"
	"github.com/cpusched/cpusched/httpsched"
)

// Example runs one gin route as tasks that yield at every Checkpoint,
// shed past 100ms of queueing, while another route runs as it is.
func Example() {
	s, err := cpusched.New(cpusched.WithWorkers(1))
	if err != nil {
		panic(err)
	}
	defer s.Close(context.Background())

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.GET("/hello", func(c *gin.Context) { c.String(http.StatusOK, "hello") })
	r.GET("/sum", ginsched.Middleware(s, httpsched.WithMaxQueueWait(100*time.Millisecond)), func(c *gin.Context) {
		task := ginsched.TaskFrom(c)
		total := 0
		for i := range 1_000_000 {
			total += i
			if err := task.Checkpoint(); err != nil {
				c.Error(err) // cut by Close or Shutdown: 503
				return
			}
		}
		c.String(http.StatusOK, fmt.Sprint(total))
	})

	for _, path := range []string{"/hello", "/sum"} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		fmt.Println(path, rec.Code, rec.Body)
	}
	// Output:
	// /hello 200 hello
	// /sum 200 499999500000
}
