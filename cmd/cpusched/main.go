// Command cpusched is the command-line face of the cpusched library: a demo
// server, a load generator, and the benchmarks and experiments that measure
// the library.
//
// Usage:
//
//	cpusched <command> [flags]
//
// The commands:
//
//	serve     run the demo HTTP server
//	load      drive an HTTP URL with closed- or open-loop load
//	bench     measure the demo server's 1 ms endpoint under CPU load, mode
//	          beside mode
//	soak      drive the demo server with a hostile mix for a long time and
//	          check it does not leak
//	lab       reproduce the scheduling experiments behind cpusched
//	fleet     run gRPC replicas behind grpc-go's balancers, with and without
//	          cpusched's load reports
//	frontier  plot the p99-against-throughput trade-off of settings measured
//	          in separate bench runs
//
// Five more are child processes that the commands above start, not for
// people to run (cpusched help leaves them out): lab-child, one measured
// workload of a lab experiment; idle-hog, the CPU load of bench's floor
// mode, in a SCHED_IDLE process; neighbor, a CPU-bound process at normal
// priority, bench's and fleet's neighbour; fleet-replica, one replica of
// fleet's gRPC demo service; and unprivileged, through which bench and
// lab libcalls, run as root, start their other children as a container
// runs a service.
//
// Run 'cpusched <command> -h' for a command's flags.
package main

// This file is only the command table and the one place where errors
// become exit codes; each subcommand lives in its own file as
// runXxx(ctx, args, stdout, stderr) and keeps its logic in an internal
// package.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cpusched/cpusched/cmd/internal/cli"
	"github.com/cpusched/cpusched/cmd/internal/fleet"
	"github.com/cpusched/cpusched/cmd/internal/hogproc"
	"github.com/cpusched/cpusched/cmd/internal/lab"
	"github.com/cpusched/cpusched/cmd/internal/unpriv"
)

// command is one row of the command table.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is the command table, in the order `cpusched help` lists them.
var commands = []command{
	{"serve", "run the demo HTTP server", runServe},
	{"load", "drive an HTTP URL with closed- or open-loop load", runLoad},
	{"bench", "measure the demo server's 1 ms endpoint under CPU load, mode beside mode", runBench},
	{"soak", "drive the demo server with a hostile mix for a long time and check it does not leak", runSoak},
	{"lab", "reproduce the scheduling experiments behind cpusched", runLab},
	{"fleet", "run gRPC replicas behind grpc-go's balancers, with and without cpusched's load reports", runFleet},
	{"frontier", "plot the p99-against-throughput trade-off of settings measured in separate bench runs", runFrontier},
	{lab.ChildCommand, "(internal) one measured workload of a lab experiment", runLabChild},
	{hogproc.Command, "(internal) the CPU load of bench's floor mode, in a SCHED_IDLE process", runIdleHog},
	{hogproc.NeighborCommand, "(internal) a CPU-bound process at normal priority, bench's and fleet's neighbour", runNeighbor},
	{fleet.ReplicaCommand, "(internal) one replica of fleet's gRPC demo service", runFleetReplica},
	{unpriv.Command, "(internal) runs a command as a container runs a service: uid 65534, no capabilities, RLIMIT_NICE 0", runUnprivileged},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// dispatch runs the command named by args[0] and returns the exit status:
// 0 on success, 2 for a usage error, 1 for any other failure.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printUsage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		var ue *cli.UsageError
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "cpusched %s: %v\n", c.name, err)
			return 2
		default:
			fmt.Fprintf(stderr, "cpusched %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "cpusched: unknown command %q\n", args[0])
	printUsage(stderr)
	return 2
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: cpusched <command> [flags]")
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		if strings.HasPrefix(c.summary, "(internal)") {
			continue
		}
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "Run 'cpusched <command> -h' for a command's flags.")
}
