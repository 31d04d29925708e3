package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/cpusched/cpusched/cmd/internal/hogproc"
)

// TestMain makes the test binary a replica, or a replica's neighbour, when
// Run starts it as one (`TESTBINARY fleet-replica FLAGS`, `TESTBINARY
// neighbor -c N`), as cmd/cpusched's binary is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == ReplicaCommand || os.Args[1] == hogproc.NeighborCommand) {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		run := ReplicaMain
		if os.Args[1] == hogproc.NeighborCommand {
			run = hogproc.NeighborMain
		}
		err := run(ctx, os.Args[2:], os.Stdin, os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// inProcessReplica runs ReplicaMain on this process with args, and returns
// its hello, a function that asks for its stats, and one that ends it
// (closing its stdin) and returns its error.
func inProcessReplica(t *testing.T, args ...string) (hello, func() replicaStats, func() error) {
	t.Helper()
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := ReplicaMain(context.Background(), args, stdinR, stdoutW, io.Discard)
		stdoutW.CloseWithError(io.EOF)
		done <- err
	}()
	lines := bufio.NewReader(stdoutR)
	readLine := func(v any) {
		t.Helper()
		line, err := lines.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading the replica's stdout: %v", err)
		}
		if err := json.Unmarshal(line, v); err != nil {
			t.Fatalf("the replica's line %q: %v", line, err)
		}
	}
	var h hello
	readLine(&h)
	stats := func() replicaStats {
		t.Helper()
		if _, err := io.WriteString(stdinW, statsRequest+"\n"); err != nil {
			t.Fatal(err)
		}
		var st replicaStats
		readLine(&st)
		return st
	}
	end := func() error {
		stdinW.Close()
		go io.Copy(io.Discard, stdoutR)
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("the replica did not stop within 10 s of its stdin's end")
			return nil
		}
	}
	return h, stats, end
}

// TestReplicaServes calls each method of a replica through a real gRPC
// channel: each answers, ends with a load report in its trailer, and is
// counted in the replica's stats; closing stdin stops it, leaving nothing
// behind (goleak).
func TestReplicaServes(t *testing.T) {
	for _, reports := range []string{ReportCpusched, ReportCPU} {
		t.Run(reports, func(t *testing.T) {
			h, stats, end := inProcessReplica(t, "-reports", reports)
			if err := checkLoopback(h.Addr); err != nil {
				t.Fatal(err)
			}
			if h.Workers < 1 || h.GOMAXPROCS < 1 || h.PID != os.Getpid() {
				t.Errorf("hello %+v: want workers and GOMAXPROCS >= 1 and this pid", h)
			}
			conn, err := dial([]string{h.Addr}, PolicyRoundRobin)
			if err != nil {
				t.Fatal(err)
			}
			for i := range methods {
				var trailer metadata.MD
				var out wrapperspb.UInt32Value
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := conn.Invoke(ctx, fullMethod(i), &emptypb.Empty{}, &out, grpc.Trailer(&trailer))
				cancel()
				if err != nil {
					t.Fatalf("%s: %v", fullMethod(i), err)
				}
				if (methods[i].passes > 0) != (out.GetValue() != 0) {
					t.Errorf("%s: CRC %d after %d passes", fullMethod(i), out.GetValue(), methods[i].passes)
				}
				lr := loadReport(trailer)
				if lr == nil {
					t.Fatalf("%s: no load report in the trailer %v", fullMethod(i), trailer)
				}
				if lr.GetRpsFractional() <= 0 {
					t.Errorf("%s: report %v: want qps > 0", fullMethod(i), lr)
				}
				if app := lr.GetApplicationUtilization(); (reports == ReportCPU) != (app == 0) {
					t.Errorf("%s with -reports %s: application_utilization %v", fullMethod(i), reports, app)
				}
			}
			conn.Close()
			st := stats()
			for i, n := range st.Served {
				if n != 1 {
					t.Errorf("stats: %s served %d calls, want 1", methods[i].name, n)
				}
			}
			if st.BatchPasses != 0 {
				t.Errorf("stats: %d batch passes without -batch", st.BatchPasses)
			}
			if err := end(); err != nil {
				t.Fatalf("the replica's error: %v", err)
			}
		})
	}
}

// TestReplicaBatchJob: with -batch the job's passes grow between two stats
// requests, while a call is still answered.
func TestReplicaBatchJob(t *testing.T) {
	h, stats, end := inProcessReplica(t, "-batch")
	defer func() {
		if err := end(); err != nil {
			t.Fatalf("the replica's error: %v", err)
		}
	}()
	first := stats()
	conn, err := dial([]string{h.Addr}, PolicyRoundRobin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conn.Invoke(ctx, fullMethod(heavy), &emptypb.Empty{}, new(wrapperspb.UInt32Value)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for stats().BatchPasses <= first.BatchPasses {
		if time.Now().After(deadline) {
			t.Fatalf("the batch job made no pass in 5 s (from %d)", first.BatchPasses)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReplicaFlags: a bad flag or argument is an error, and nothing starts.
func TestReplicaFlags(t *testing.T) {
	for _, args := range [][]string{{"-reports", "qps"}, {"-bogus"}, {"now"}} {
		if err := ReplicaMain(context.Background(), args, nil, io.Discard, io.Discard); err == nil {
			t.Errorf("ReplicaMain(%q): no error", args)
		}
	}
}

// TestReplicaRefusesOtherRequests: a line on stdin that is not a stats
// request ends the replica with an error that quotes it.
func TestReplicaRefusesOtherRequests(t *testing.T) {
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- ReplicaMain(context.Background(), nil, stdinR, stdoutW, io.Discard) }()
	go io.Copy(io.Discard, stdoutR)
	if _, err := io.WriteString(stdinW, "shutdown\n"); err != nil {
		t.Fatal(err)
	}
	err := <-done
	stdinW.Close()
	stdoutW.Close()
	if err == nil || !strings.Contains(err.Error(), `"shutdown"`) {
		t.Fatalf("ReplicaMain after \"shutdown\": %v, want an error quoting it", err)
	}
}
