package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/cmd/internal/bench"
	"github.com/cpusched/cpusched/cmd/internal/cli"
	"github.com/cpusched/cpusched/cmd/internal/demo"
	"github.com/cpusched/cpusched/cmd/internal/hogproc"
	"github.com/cpusched/cpusched/cmd/internal/report"
	"github.com/cpusched/cpusched/cmd/internal/unpriv"
)

// benchRun is bench.Run; tests replace it.
var benchRun = bench.Run

// runBench is `cpusched bench`: for the floor and each isolation mode it
// starts `cpusched serve` as a child process and measures the 1 ms endpoint
// idle, under a direct CPU load, under the same load through cpusched (with
// and without Checkpoints), with small tasks added, a busy fast route
// beside that load, all of it beside a CPU-bound neighbour process, and
// the same load found heavy by httpsched.Auto on a server wrapped whole; it
// prints one table (and JSON and a plot on request).
// On SIGINT it stops the server, prints the rows measured so far and
// returns the interruption as an error.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench", stderr)
	step := fs.Duration("step", bench.DefaultStep, fmt.Sprintf("measured length of each step (%v..%v); default %v, or %v with -quick (longer with fewer -modes or -steps)", bench.MinStep, bench.MaxStep, bench.DefaultStep, bench.QuickStep(nil, nil)))
	modes := fs.String("modes", strings.Join(bench.AllModes(), ","), "comma-separated modes to measure, in order: "+bench.ModeFloor+" (the reference: the same CPU work in a SCHED_IDLE process) and isolation modes; MODE:N runs isolation mode MODE with N workers (e.g. ospriority,ospriority:1)")
	probeRate := fs.Float64("probe-rate", bench.DefaultProbeRate, fmt.Sprintf("open-loop rate of the /delay1ms probe, requests/s (1..%d)", bench.MaxProbeRate))
	hogC := fs.Int("hog-c", bench.DefaultHogConcurrency, fmt.Sprintf("concurrency of the CPU-heavy /checksum load (1..%d)", bench.MaxConcurrency))
	ioC := fs.Int("io-c", bench.DefaultIOConcurrency, fmt.Sprintf("connections of io-heavy's closed loop on the fast route (1..%d)", bench.MaxConcurrency))
	smallRate := fs.Float64("small-rate", bench.DefaultSmallRate, fmt.Sprintf("open-loop rate of the small requests, scheduled and direct each, requests/s (1..%d)", bench.MaxSmallRate))
	steps := fs.String("steps", "", "comma-separated steps to measure (default every step of each mode but "+bench.StepTenants+", and "+bench.StepAuto+" in the default isolation mode ("+cpusched.DefaultIsolation().String()+") only; they are measured where named): "+strings.Join(bench.StepNames(), ", ")+"; the floor also measures those the named steps compare with")
	tenantWeights := fs.String("tenant-weights", bench.TenantWeights(bench.DefaultTenants()), fmt.Sprintf("the tenants step's group weights, W:W:W:W (%d..%d each), of groups t1..t4", demo.MinGroupWeight, demo.MaxGroupWeight))
	clean := fs.Bool("clean", false, "the clean room: the servers make no garbage at all (serve -garbage 0)")
	gc := fs.Bool("gc", false, fmt.Sprintf("heavy garbage: every fast request builds %d KiB (serve -gc), so the collector is always busy; default %d KiB", demo.HeavyGarbage>>10, demo.DefaultGarbage>>10))
	neighborC := fs.Int("neighbor-c", runtime.NumCPU(), fmt.Sprintf("the neighbour's CPU-bound threads in the neighbor steps (1..%d; one per CPU by default)", bench.MaxNeighborConcurrency))
	cgroups := fs.Bool("cgroups", false, "run each server (with the floor's hog) and its neighbour in a cgroup of its own, equal weights, as two containers on a node (Linux, root); with -cpu-quota, the server's has the quota")
	jsonPath := fs.String("json", "", "also write the results as JSON to this file (- for stdout, instead of the table)")
	outDir := fs.String("out", "", "also write DIR/bench.json, DIR/bench.png (probe latency plot) and DIR/frontier.png (p99 x the floor against throughput)")
	traceDir := fs.String("trace", "", "record a runtime/trace of each server during hog-sched, hog-nockpt, hog-sched+small, io-heavy, neighbor-alone, neighbor, neighbor-nockpt, tenants and auto into DIR and attribute every probe request slower than 2x the idle p99, and every io-heavy request slower than 2x the floor's io-heavy p99, to its causes (DIR/MODE-STEP.txt)")
	traceAbove := fs.Duration("trace-above", 0, fmt.Sprintf("with -trace, attribute the requests slower than this (%v..%v) in every traced step instead", bench.MinTraceAbove, bench.MaxTraceAbove))
	quick := fs.Bool("quick", false, "short steps for CI: the whole run takes under 60 s ("+bench.StepAuto+" left out unless -steps names it)")
	workers := fs.Int("workers", 0, "pass -workers to every server; 0 lets each mode choose")
	slice := fs.Duration("slice", 0, "pass -slice to every server; 0 lets each mode choose")
	privileged := fs.Bool("privileged", false, "keep the servers, the floor's hog and the neighbour running as root (bench must be root); by default a bench run as root runs them as a container runs a service: uid 65534, no CAP_SYS_NICE, RLIMIT_NICE 0 (Linux)")
	cpuQuota := fs.Float64("cpu-quota", 0, fmt.Sprintf("run every server in its own cgroup limited to this many CPUs (%g..%d; Linux, root); 0: no limit", bench.MinCPUQuota, runtime.NumCPU()))
	cpuset := fs.Bool("cpuset", false, "run the servers and the floor's hog on half the CPUs, bench (the load generator) and the neighbour on the other half"+cpusetHalves()+", by sched_setaffinity (Linux, 2 CPUs or more); the neighbour's threads default to one per CPU of its half")
	serverProcs := fs.Int("server-procs", 0, fmt.Sprintf("give every server and the floor's hog GOMAXPROCS=N (1..%d, with -cpuset 1..its half), a service on a node with CPUs left idle; 0: the runtime's default", runtime.NumCPU()))
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: cpusched bench [flags]")
		fs.PrintDefaults()
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected argument %q (bench takes only flags)", fs.Arg(0))
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program to start the server: %w", err)
	}
	cfg := bench.DefaultConfig(exe, "serve")
	cfg.Modes = cli.SplitList(*modes)
	cfg.ProbeRate, cfg.HogConcurrency, cfg.SmallRate, cfg.IOConcurrency = *probeRate, *hogC, *smallRate, *ioC
	if *clean && *gc {
		return cli.Usagef("-clean and -gc: give one of them (default: %d KiB of garbage per fast request)", demo.DefaultGarbage>>10)
	}
	switch {
	case *clean:
		cfg.Garbage = 0
	case *gc:
		cfg.Garbage = demo.HeavyGarbage
	}
	cfg.Steps = cli.SplitList(*steps)
	if err := bench.SetTenantWeights(cfg.Tenants, *tenantWeights); err != nil {
		return cli.Usagef("-tenant-weights: %v", err)
	}
	cfg.NeighborConcurrency, cfg.Cgroups = *neighborC, *cgroups
	cfg.Quick = *quick
	cfg.Workers, cfg.Slice = *workers, *slice
	cfg.CPUQuota = *cpuQuota
	cfg.CPUSet, cfg.ServerProcs = *cpuset, *serverProcs
	if _, others, err := bench.CPUSetHalves(); *cpuset && err == nil && !cli.Given(fs, "neighbor-c") {
		cfg.NeighborConcurrency = len(others) // one per CPU it may run on
	}
	cfg.Privileged = *privileged
	cfg.TraceDir, cfg.TraceAbove = *traceDir, *traceAbove
	cfg.Step = *step
	if *quick {
		cfg.Warmup, cfg.Settle = bench.QuickWarmup, bench.QuickSettle
		if !cli.Given(fs, "step") {
			cfg.Step = bench.QuickStep(cfg.Modes, cfg.Steps)
		}
	}
	if err := cfg.Validate(); err != nil {
		return cli.Usagef("%s", strings.TrimPrefix(err.Error(), "bench: "))
	}
	if err := checkOutputs(*jsonPath, *outDir); err != nil {
		return err
	}
	cfg.Progress = report.NewProgress(stderr)

	rep, runErr := benchRun(ctx, cfg)
	if errors.Is(runErr, bench.ErrCPUQuota) {
		// Found before anything was measured: the flag cannot work here.
		return cli.Usagef("-cpu-quota %g: %s", cfg.CPUQuota, strings.TrimPrefix(runErr.Error(), "bench: "))
	}
	if errors.Is(runErr, bench.ErrCgroups) {
		return cli.Usagef("-cgroups: %s", strings.TrimPrefix(runErr.Error(), "bench: "))
	}
	if errors.Is(runErr, bench.ErrPrivileged) {
		return cli.Usagef("-privileged: %s", strings.TrimPrefix(runErr.Error(), "bench: "))
	}
	if runErr != nil {
		// main already says "cpusched bench:".
		runErr = errors.New(strings.TrimPrefix(runErr.Error(), "bench: "))
		if ctx.Err() != nil {
			runErr = errors.New("interrupted")
		}
	}
	if rep == nil || runErr != nil && len(rep.Results) == 0 {
		return runErr
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "stopped early (%v): the results cover the steps measured until then\n", runErr)
	}
	if err := writeBenchOutputs(rep, *jsonPath, *outDir, stdout); err != nil {
		return err
	}
	return runErr
}

// cpusetHalves returns " (here CPU 0 and CPU 1)" for -cpuset's help, or
// "" where the CPUs cannot be split.
func cpusetHalves() string {
	server, others, err := bench.CPUSetHalves()
	if err != nil {
		return ""
	}
	return fmt.Sprintf(" (here CPU %s and CPU %s)", bench.FormatCPUs(server), bench.FormatCPUs(others))
}

// runIdleHog is the hidden command that bench's floor mode starts for its
// CPU load: `cpusched idle-hog -c N`, talking with bench on its stdin and
// stdout.
func runIdleHog(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return hogproc.Main(ctx, args, os.Stdin, stdout, stderr)
}

// runNeighbor is the hidden command that bench's neighbor step, and
// fleet's neighbor scenario, start beside a server: `cpusched neighbor -c
// N`, CPU-bound at normal priority, talking as the idle hog does.
func runNeighbor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return hogproc.NeighborMain(ctx, args, os.Stdin, stdout, stderr)
}

// runUnprivileged is the hidden command through which bench, run as root,
// starts its servers, the floor's hog and the neighbour: `cpusched
// unprivileged -- PROG ARGS...` execs PROG as a container runs a service.
func runUnprivileged(_ context.Context, args []string, _, stderr io.Writer) error {
	return unpriv.Main(args, stderr)
}

// writeBenchOutputs prints the table (unless the JSON goes to stdout) and
// writes the JSON file and the -out directory's files.
func writeBenchOutputs(rep *bench.Report, jsonPath, outDir string, stdout io.Writer) error {
	if jsonPath == "-" {
		if err := rep.WriteJSON(stdout); err != nil {
			return err
		}
	} else if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if jsonPath != "" && jsonPath != "-" {
		if err := writeFile(jsonPath, rep.WriteJSON); err != nil {
			return err
		}
	}
	for _, r := range rep.Results {
		if r.Attribution != "" && jsonPath != "-" {
			fmt.Fprintf(stdout, "\n%s %s: slow requests attributed in %s\n", r.Mode, r.Step, r.Attribution)
		}
	}
	if outDir != "" {
		if err := os.MkdirAll(outDir, 0o755); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(outDir, "bench.json"), rep.WriteJSON); err != nil {
			return err
		}
		png := filepath.Join(outDir, "bench.png")
		if err := rep.WritePlot(png); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		wrote := png
		frontier := filepath.Join(outDir, "frontier.png")
		if err := rep.WriteFrontier(frontier); err == nil {
			wrote += " and " + frontier
		} else if jsonPath != "-" {
			fmt.Fprintf(stdout, "\nno frontier plot: %v\n", err)
		}
		if jsonPath != "-" {
			fmt.Fprintf(stdout, "\nwrote %s, %s\n", filepath.Join(outDir, "bench.json"), wrote)
		}
	}
	return nil
}

// checkOutputs checks the -json file and the -out directory before a run
// that writes them only at its end.
func checkOutputs(jsonPath, outDir string) error {
	if err := cli.CheckOutputFile("json", jsonPath); err != nil {
		return err
	}
	return cli.CheckOutputDir("out", outDir)
}

// writeFile creates path and fills it with write.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}
