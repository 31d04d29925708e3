package httpsched_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
)

// ExampleHandler serves a CPU-heavy handler as a task that yields at every
// Checkpoint.
func ExampleHandler() {
	s, err := cpusched.New(cpusched.WithWorkers(1))
	if err != nil {
		panic(err)
	}
	defer s.Close(context.Background())

	sum := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		task := httpsched.TaskFrom(r.Context())
		total := 0
		for i := range 1_000_000 {
			total += i
			if err := task.Checkpoint(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, total)
	})
	h := httpsched.Handler(s, sum, httpsched.WithTaskOptions(cpusched.WithNice(5)))

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/sum", nil))
	body, _ := io.ReadAll(rec.Body)
	fmt.Print(rec.Code, " ", string(body))
	// Output: 200 499999500000
}
