package httpsched_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

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

// ExampleWithErrorHandler answers in the service's own format (JSON here)
// and keeps the library's messages from the client: a 300-byte tenant
// header is a group name too long for cpusched.WithGroup.
func ExampleWithErrorHandler() {
	s, err := cpusched.New(cpusched.WithWorkers(1))
	if err != nil {
		panic(err)
	}
	defer s.Close(context.Background())

	tenant := func(r *http.Request) ([]cpusched.TaskOption, error) {
		return []cpusched.TaskOption{cpusched.WithGroup(r.Header.Get("X-Tenant"))}, nil
	}
	answer := func(w http.ResponseWriter, r *http.Request, status int, err error) {
		msg := "internal error"
		switch status {
		case http.StatusBadRequest: // err names cpusched.WithGroup
			msg = "the X-Tenant header is not a tenant"
		case http.StatusServiceUnavailable: // Retry-After is set
			msg = "busy, retry later"
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"error": msg})
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello", r.Header.Get("X-Tenant"))
	})
	h := httpsched.Handler(s, hello, httpsched.WithRequestTaskOptions(tenant), httpsched.WithErrorHandler(answer))

	for _, name := range []string{"acme", strings.Repeat("t", 300)} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Tenant", name)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		fmt.Print(rec.Code, " ", rec.Body)
	}
	// Output:
	// 200 hello acme
	// 400 {"error":"the X-Tenant header is not a tenant"}
}
