package httpsched_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
)

// ExampleShutdown stops a server and its scheduler by one deadline: the
// requests in flight finish if they can, and those still queued or
// running a second before it are answered 503 rather than reset. In a
// program, the stop comes from signal.NotifyContext(ctx, syscall.SIGTERM).
func ExampleShutdown() {
	s, err := cpusched.New()
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /sum", httpsched.Handler(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		task := httpsched.TaskFrom(r.Context())
		total := 0
		for i := range 1_000_000 {
			total += i
			if err := task.Checkpoint(); err != nil {
				return // cut by Shutdown: httpsched answers 503
			}
		}
		fmt.Fprintln(w, total)
	})))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + ln.Addr().String() + "/sum")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Print(resp.StatusCode, " ", string(body))

	// The stop: ten seconds for the requests in flight, 503s at nine.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := httpsched.Shutdown(ctx, srv, s); err != nil {
		fmt.Println(err)
	}
	fmt.Println(errors.Is(<-served, http.ErrServerClosed))
	// Output:
	// 200 499999500000
	// true
}
