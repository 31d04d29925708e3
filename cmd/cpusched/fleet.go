package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/cpusched/cpusched/cmd/internal/bench"
	"github.com/cpusched/cpusched/cmd/internal/cli"
	"github.com/cpusched/cpusched/cmd/internal/fleet"
	"github.com/cpusched/cpusched/cmd/internal/report"
)

// runFleet is `cpusched fleet`: replicas of a gRPC demo service, each a
// child process, behind grpc-go's round_robin and weighted_round_robin
// balancers, fed by cpusched's load reports or by the CPU alone, in the
// quota, batch and neighbor scenarios; it prints the tables (and JSON and plots on
// request). On SIGINT it stops the replicas, prints the rows measured so
// far and returns the interruption as an error.
func runFleet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("fleet", stderr)
	replicas := fs.Int("replicas", fleet.DefaultReplicas, fmt.Sprintf("replicas per row, each a child process (%d..%d)", fleet.MinReplicas, fleet.MaxReplicas))
	scenarios := fs.String("scenarios", strings.Join(fleet.Scenarios(), ","), "comma-separated scenarios, in order: "+fleet.ScenarioQuota+" (the first replica under a smaller CPU quota; needs cgroups), "+fleet.ScenarioBatch+" (the first replica runs a batch job at ClassIdle) and "+fleet.ScenarioNeighbor+" (the first replica shares its cgroup's quota with a CPU-bound process; needs cgroups)")
	policies := fs.String("policies", strings.Join(fleet.Policies(), ","), "comma-separated client balancing policies, in order")
	quotaRate := fs.Float64("quota-rate", 0, fmt.Sprintf("open-loop rate of the quota scenario, calls/s (%d..%d); 0: %d scaled to this machine's heavy call", fleet.MinRate, fleet.MaxRate, fleet.DefaultQuotaRate))
	batchRate := fs.Float64("batch-rate", 0, fmt.Sprintf("open-loop rate of the batch scenario, calls/s (%d..%d); 0: %d scaled to this machine's heavy call", fleet.MinRate, fleet.MaxRate, fleet.DefaultBatchRate))
	neighborRate := fs.Float64("neighbor-rate", 0, fmt.Sprintf("open-loop rate of the neighbor scenario, calls/s (%d..%d); 0: %d scaled to this machine's heavy call", fleet.MinRate, fleet.MaxRate, fleet.DefaultNeighborRate))
	weakCPU := fs.Float64("weak-cpu", fleet.DefaultWeakCPU, fmt.Sprintf("the quota scenario's CPU limit of the first replica, CPUs (%g..%d)", bench.MinCPUQuota, runtime.NumCPU()))
	cpu := fs.Float64("cpu", fleet.DefaultCPU, fmt.Sprintf("the CPU limit of the quota scenario's other replicas and of every neighbor replica, CPUs (%g..%d)", bench.MinCPUQuota, runtime.NumCPU()))
	duration := fs.Duration("duration", fleet.DefaultDuration, fmt.Sprintf("measured time of each row, split into -rounds segments of at least %v (%v..%v); default %v, or %v with -quick", fleet.MinDuration, fleet.MinDuration, fleet.MaxDuration, fleet.DefaultDuration, fleet.QuickDuration))
	rounds := fs.Int("rounds", fleet.DefaultRounds, fmt.Sprintf("rounds per scenario, each a segment of every policy in turn on fresh replicas (%d..%d); default %d, or %d with -quick", fleet.MinRounds, fleet.MaxRounds, fleet.DefaultRounds, fleet.QuickRounds))
	warmup := fs.Duration("warmup", fleet.DefaultWarmup, fmt.Sprintf("unmeasured load before each segment's measured time (0..%v)", fleet.MaxWarmup))
	arrivals := fs.String("arrivals", fleet.DefaultArrivals, "when the calls fall due: "+strings.Join(fleet.Arrivals(), " or ")+" (a fixed interval, or random Poisson times at the rate)")
	timeout := fs.Duration("timeout", fleet.DefaultTimeout, fmt.Sprintf("each call's deadline from its due time (%v..%v)", fleet.MinTimeout, fleet.MaxTimeout))
	jsonPath := fs.String("json", "", "also write the results as JSON to this file (- for stdout, instead of the tables)")
	outDir := fs.String("out", "", "also write DIR/"+fleet.JSONFile+", DIR/"+fleet.P99Plot+" (p99s) and DIR/"+fleet.SharePlot+" (the replicas' shares)")
	quick := fs.Bool("quick", false, "short rows for CI: the whole run takes under 90 s")
	medianOf := fs.String("medians", "", fmt.Sprintf("run nothing: read these comma-separated JSON reports of earlier runs (%d..%d) and print each row's p99 in each and their median, and the targets checked on the median of each run's ratios (with -json, as JSON)", fleet.MinMedianRuns, fleet.MaxMedianRuns))
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: cpusched fleet [flags]")
		fs.PrintDefaults()
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected argument %q (fleet takes only flags)", fs.Arg(0))
	}
	if *medianOf != "" {
		return fleetMedians(fs, cli.SplitList(*medianOf), *jsonPath, stdout)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program to start the replicas: %w", err)
	}
	cfg := fleet.DefaultConfig(exe)
	cfg.Replicas = *replicas
	cfg.Scenarios, cfg.Policies = cli.SplitList(*scenarios), cli.SplitList(*policies)
	cfg.QuotaRate, cfg.BatchRate, cfg.NeighborRate = *quotaRate, *batchRate, *neighborRate
	cfg.WeakCPU, cfg.CPU = *weakCPU, *cpu
	cfg.Duration, cfg.Warmup, cfg.Timeout = *duration, *warmup, *timeout
	cfg.Rounds, cfg.Arrivals = *rounds, *arrivals
	if *quick {
		if !cli.Given(fs, "duration") {
			cfg.Duration = fleet.QuickDuration
		}
		if !cli.Given(fs, "warmup") {
			cfg.Warmup = fleet.QuickWarmup
		}
		if !cli.Given(fs, "rounds") {
			cfg.Rounds = fleet.QuickRounds
		}
	}
	cfg.JSONPath, cfg.OutDir = *jsonPath, *outDir
	if err := cfg.Validate(); err != nil {
		return cli.Usagef("%s", strings.TrimPrefix(err.Error(), "fleet: "))
	}
	if err := checkOutputs(cfg.JSONPath, cfg.OutDir); err != nil {
		return err
	}
	cfg.Stdout, cfg.Progress = stdout, report.NewProgress(stderr)

	runErr := fleetRun(ctx, cfg)
	switch {
	case errors.Is(runErr, fleet.ErrNothingToRun):
		// Found before anything started: the flags cannot work here.
		return cli.Usagef("-scenarios %s: %s", *scenarios, strings.TrimPrefix(runErr.Error(), "fleet: "))
	case runErr != nil && ctx.Err() != nil:
		return errors.New("interrupted")
	case runErr != nil:
		return errors.New(strings.TrimPrefix(runErr.Error(), "fleet: ")) // main already says "cpusched fleet:"
	}
	return nil
}

// fleetMedians is `cpusched fleet -medians`: the runs' reports at paths
// read, their medians written as a table, or as JSON to jsonPath ("-":
// stdout). It takes no flag of a run.
func fleetMedians(fs *flag.FlagSet, paths []string, jsonPath string, stdout io.Writer) error {
	var other []string
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "medians" && f.Name != "json" {
			other = append(other, "-"+f.Name)
		}
	})
	if len(other) > 0 {
		return cli.Usagef("-medians reads earlier runs and takes no flag of a run but -json; got %s", strings.Join(other, ", "))
	}
	m, err := fleet.ReadMedians(paths)
	if err != nil {
		return cli.Usagef("-medians: %s", strings.TrimPrefix(err.Error(), "fleet: "))
	}
	if jsonPath == "" {
		return m.WriteTable(stdout)
	}
	w := stdout
	if jsonPath != "-" {
		f, err := os.Create(jsonPath)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
		if err := m.WriteTable(stdout); err != nil {
			return err
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(m)
}

// fleetRun is fleet.Run; tests replace it.
var fleetRun = fleet.Run

// runFleetReplica is the hidden command that fleet starts for each
// replica: `cpusched fleet-replica`, talking with fleet on its stdin and
// stdout.
func runFleetReplica(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return fleet.ReplicaMain(ctx, args, os.Stdin, stdout, stderr)
}
