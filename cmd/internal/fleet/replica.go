package fleet

// One replica, the child process that Run starts for each replica of a
// row: the demo service behind grpcsched, wired as docs/grpc.md#wiring
// shows, on 127.0.0.1.
//
// It talks with Run over its stdin and stdout, a JSON line each: first it
// prints a hello (its address and CPU budget); then it answers each
// "stats" line on stdin with its counters; at the end of stdin (Run is
// done with it, or died) or when ctx ends it stops and exits.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/orca"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/cmd/internal/cli"
	"github.com/cpusched/cpusched/grpcsched"
	"github.com/cpusched/cpusched/internal/cgroupcpu"
)

// ReplicaCommand is the hidden command that runs one replica:
// `cpusched fleet-replica [-batch] [-reports cpusched|cpu]`.
const ReplicaCommand = "fleet-replica"

// The replica's load reports, its -reports flag.
const (
	// ReportCpusched sends grpcsched's reports as they are.
	ReportCpusched = "cpusched"
	// ReportCPU leaves application_utilization out of them: grpc-go's
	// weighted_round_robin then weighs the replica by cpu_utilization and
	// qps, as it would a replica without cpusched that reports its CPU.
	ReportCPU = "cpu"
)

// statsRequest is the line Run writes to ask for the replica's counters.
const statsRequest = "stats"

// shutdownGrace bounds the replica's graceful stop: the client has closed
// its connection by then, so this only bounds a stuck call.
const shutdownGrace = 2 * time.Second

// hello is the replica's first line.
type hello struct {
	Addr       string  `json:"addr"`
	PID        int     `json:"pid"`
	GOMAXPROCS int     `json:"gomaxprocs"`
	Workers    int     `json:"workers"`
	Isolation  string  `json:"isolation"`
	CPULimit   float64 `json:"cpu_limit"` // the cgroup's, as the scheduler reads it; 0: none
}

// replicaStats is the replica's answer to statsRequest: counters since it
// started.
type replicaStats struct {
	Served      [numMethods]int64 `json:"served"` // calls per method, in methods' order
	BatchPasses int64             `json:"batch_passes"`
}

// ReplicaMain runs a replica until stdin ends or ctx is done. Its errors
// are for the replica's stderr, which Run quotes.
func ReplicaMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet(ReplicaCommand, stderr)
	batch := fs.Bool("batch", false, "also run a batch job at ClassIdle through the replica's scheduler")
	reports := fs.String("reports", ReportCpusched, "the load reports: "+ReportCpusched+" (grpcsched's) or "+ReportCPU+" (without application_utilization)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *reports != ReportCpusched && *reports != ReportCPU {
		return cli.Usagef("-reports must be %s or %s, got %q", ReportCpusched, ReportCPU, *reports)
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected argument %q (%s takes only flags)", fs.Arg(0), ReplicaCommand)
	}

	s, err := cpusched.New()
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		_ = s.Close(closeCtx)
	}()
	var provider orca.ServerMetricsProvider = grpcsched.ServerMetricsProvider(s)
	if *reports == ReportCPU {
		provider = cpuOnly{provider}
	}
	srv := grpc.NewServer(
		orca.CallMetricsServerOption(provider), // first, as grpc-go's orca asks
		grpc.ChainUnaryInterceptor(grpcsched.UnaryServerInterceptor(s)),
		grpc.ChainStreamInterceptor(grpcsched.StreamServerInterceptor(s)),
	)
	svc := newService()
	svc.register(srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() {
		stopGracefully(srv)
		<-served
	}()

	jobCtx, stopJob := context.WithCancel(ctx)
	defer stopJob()
	if *batch {
		if _, err := s.Go(jobCtx, svc.batch, cpusched.WithClass(cpusched.ClassIdle)); err != nil {
			return fmt.Errorf("starting the batch job: %w", err)
		}
	}

	limit, _, err := cgroupcpu.Limit()
	if err != nil {
		return err
	}
	st := s.Stats()
	out := json.NewEncoder(stdout)
	if err := out.Encode(hello{
		Addr: lis.Addr().String(), PID: os.Getpid(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		Workers: st.Workers, Isolation: st.Isolation.String(), CPULimit: limit,
	}); err != nil {
		return err
	}
	return answer(ctx, stdin, func() error { return out.Encode(svc.stats()) })
}

// answer calls stats for every statsRequest line of stdin until stdin ends
// or ctx is done.
func answer(ctx context.Context, stdin io.Reader, stats func() error) error {
	lines, quit := make(chan string), make(chan struct{})
	defer close(quit)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-quit:
				return // the replica is stopping; the process's exit ends the read
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			if strings.TrimSpace(line) != statsRequest {
				return fmt.Errorf("unexpected request %q on stdin (want %q)", line, statsRequest)
			}
			if err := stats(); err != nil {
				return err
			}
		}
	}
}

// stopGracefully stops srv, waiting at most shutdownGrace for its calls.
func stopGracefully(srv *grpc.Server) {
	t := time.AfterFunc(shutdownGrace, srv.Stop)
	srv.GracefulStop()
	t.Stop()
}

// stats returns the service's counters.
func (s *service) stats() replicaStats {
	var st replicaStats
	for i := range s.served {
		st.Served[i] = s.served[i].Load()
	}
	st.BatchPasses = s.batchPasses.Load()
	return st
}

// cpuOnly is a provider whose reports leave application_utilization unset
// (-1, which grpc-go's orca package leaves out of the report): grpc-go's
// weighted_round_robin takes cpu_utilization where the application's is
// 0, so it weighs the replica by its CPU and qps alone.
type cpuOnly struct{ orca.ServerMetricsProvider }

// ServerMetrics returns the wrapped provider's report without
// application_utilization.
func (p cpuOnly) ServerMetrics() *orca.ServerMetrics {
	m := p.ServerMetricsProvider.ServerMetrics()
	m.AppUtilization = -1
	return m
}
