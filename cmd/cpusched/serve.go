package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/cmd/internal/cli"
	"github.com/cpusched/cpusched/cmd/internal/demo"
)

// runServe is `cpusched serve [flags]`: the demo HTTP server (cpuworker's
// endpoints, /stats, /metrics, /debug/pprof) until SIGINT or SIGTERM. Once it listens
// it prints one line on stdout,
//
//	cpusched serve: listening on http://127.0.0.1:PORT (isolation=reserve workers=1 gomaxprocs=2)
//
// which programs that start it with -addr 127.0.0.1:0 parse for the port.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("serve", stderr)
	// The zero Isolation is the library's default mode (see WithIsolation).
	defaultIsolation := cpusched.DefaultIsolation()
	addr := fs.String("addr", demo.DefaultAddr, "listen address host:port (port 0 picks a free port)")
	isolation := fs.String("isolation", defaultIsolation.String(), "isolation mode: "+strings.Join(demo.ModeNames(), ", "))
	workers := fs.Int("workers", 0, "worker slots; 0 lets the isolation mode choose")
	slice := fs.Duration("slice", 0, fmt.Sprintf("scheduler time slice; 0 lets the isolation mode choose (%v, or 10ms for ospriority)", cpusched.DefaultSlice))
	garbage := fs.Int("garbage", demo.DefaultGarbage, fmt.Sprintf("bytes of the response buffer every fast request (/delay, /delay1ms) builds and leaves to the collector, 0..%d; with any, the CRC32 work also allocates %d KiB every %d passes; 0: no garbage at all", demo.MaxGarbage, demo.TaskGarbage>>10, demo.TaskGarbageEvery))
	groups := fs.String("groups", "", fmt.Sprintf("groups to track, NAME=WEIGHT,... (weights %d..%d): /checksum?group=NAME's tasks share the slots by them, and /stats counts each one's passes", demo.MinGroupWeight, demo.MaxGroupWeight))
	auto := fs.Bool("auto", false, "serve the whole server through httpsched.Auto: the routes whose requests use the most CPU (here /checksum) run as tasks, found by measuring, none marked; /checksum's sched is then ignored (sched=1 is served as sched=0), and /stats lists the routes")
	heavy := fs.Bool("gc", false, fmt.Sprintf("heavy garbage: -garbage %d (%d KiB per fast request), to keep the collector always busy", demo.HeavyGarbage, demo.HeavyGarbage>>10))
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: cpusched serve [flags]")
		fs.PrintDefaults()
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("takes no arguments, got %q", fs.Args())
	}
	if *heavy {
		if cli.Given(fs, "garbage") {
			return cli.Usagef("-gc is -garbage %d: give one of them, not both", demo.HeavyGarbage)
		}
		*garbage = demo.HeavyGarbage
	}
	if err := demo.CheckGarbage(*garbage); err != nil {
		return cli.Usagef("-garbage %v", err)
	}
	groupWeights, err := demo.ParseGroups(*groups)
	if err != nil {
		return cli.Usagef("-groups: %v", err)
	}
	mode, err := cpusched.ParseIsolation(*isolation)
	if err != nil {
		return cli.Usagef("-isolation: %v", err)
	}
	if err := demo.CheckOverrides(*workers, *slice); err != nil {
		return cli.Usagef("%v (or 0 for the mode's default)", err)
	}
	// A malformed address is the command line's fault (exit 2); one that
	// cannot be bound (in use, a host not here) is found by listening.
	_, port, err := net.SplitHostPort(*addr)
	if err != nil {
		return cli.Usagef("-addr must be host:port (port 0 picks a free port), got %q", *addr)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return cli.Usagef("-addr: the port must be 0..65535 or a service name, got %q", port)
	}
	// The scheduler's few events (mode, GOMAXPROCS raised and restored,
	// fallback) go to stderr, as they did before WithLogger existed.
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	cfg := demo.Config{Isolation: mode, Workers: *workers, Slice: *slice, Garbage: *garbage, Logger: logger, Groups: groupWeights, Auto: *auto}
	return demo.Serve(ctx, *addr, cfg, func(l demo.Listening) {
		fmt.Fprintf(stdout, "cpusched serve: %s\n", l)
	})
}
