package soak

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/cmd/internal/demo"
)

// TestMain lets the end-to-end test start this test binary as its server:
// called as "serve -addr ADDR", it serves the demo as `cpusched serve`
// does, until SIGTERM.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Exit(serve(os.Args[2:]))
	}
	goleak.VerifyTestMain(m)
}

func serve(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := demo.Serve(ctx, *addr, demo.Config{Isolation: cpusched.DefaultIsolation()}, func(l demo.Listening) {
		fmt.Printf("cpusched serve: %s\n", l)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
