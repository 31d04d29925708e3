package httplab

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/cli"
	"github.com/cpusched/cpusched/cmd/internal/lab"
	"github.com/cpusched/cpusched/cmd/internal/report"
)

// quickWarmup is -warmup under -quick.
const quickWarmup = 200

// seedFigures is the seed's table ("Benchmarking Go, Scala and Node.js",
// 2014, `ab -c 100 -n 10000`, same host): req/s, mean latency and peak RSS
// by server.
var seedFigures = map[string]string{
	"go":      "Go net/http 2,319 req/s, 43 ms, 8 MB",
	"martini": "Martini 2,102 req/s, 9 MB",
	"node":    "Node.js 2,301 req/s, 57 MB",
	"jvm":     "Scala/Finagle 1,302, 808 MB; Spray 1,617, 833 MB",
}

// Experiment returns `cpusched lab http`: HTTP servers answering 1 MiB, one
// process each, under ab-style load. lookPath finds node, javac and java
// (exec.LookPath; tests pass one that finds nothing).
func Experiment(lookPath func(file string) (string, error)) lab.Experiment {
	return lab.Experiment{
		Name:      "http",
		Summary:   "HTTP servers answering 1 MiB, one process each, under ab-style load ('Benchmarking Go, Scala and Node.js', 2014)",
		QuickHelp: fmt.Sprintf("short run: -n %d (under 20 s)", QuickRequests),
		OutHelp:   "write http.json and a req/s bar chart (http.png) into this directory",
		New:       func() lab.Run { return &run{lookPath: lookPath} },
		Child:     child,
	}
}

// run is one `cpusched lab http`: its flags, then its Config.
type run struct {
	lookPath               func(file string) (string, error)
	servers                *string
	concurrency, n, warmup *int
	cfg                    Config
}

func (r *run) Flags(fs *flag.FlagSet) {
	r.servers = fs.String("servers", strings.Join(Servers, ","), "comma-separated servers: "+strings.Join(Servers, ", "))
	r.concurrency = fs.Int("c", DefaultConcurrency, "concurrent connections (ab -c)")
	r.n = fs.Int("n", DefaultRequests, "measured requests per server (ab -n)")
	r.warmup = fs.Int("warmup", DefaultWarmup, "requests sent before each measured run")
}

func (r *run) Setup(s lab.Setup) error {
	cfg := Config{Servers: cli.SplitList(*r.servers), Concurrency: *r.concurrency, Requests: *r.n, Warmup: *r.warmup,
		LookPath: r.lookPath, Command: s.Child}
	if s.Quick {
		if !s.Given("n") {
			cfg.Requests = QuickRequests
		}
		if !s.Given("warmup") {
			cfg.Warmup = quickWarmup
		}
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	fmt.Fprintf(s.Stderr, "lab http: %d servers, one at a time: %d warm-up + %d requests of 1 MiB at -c %d each\n",
		len(cfg.Servers), cfg.Warmup, cfg.Requests, cfg.Concurrency)
	r.cfg = cfg
	return nil
}

func (r *run) Measure(ctx context.Context, progress func(string, ...any)) (*lab.Report, error) {
	start := time.Now()
	r.cfg.Progress = func(s string) { progress("lab http: %s  (%s elapsed)", s, time.Since(start).Round(time.Second)) }
	results, err := Run(ctx, r.cfg)
	if err != nil {
		return nil, err
	}
	total := time.Since(start)
	cfg := r.cfg
	doc := document{Concurrency: cfg.Concurrency, Requests: cfg.Requests, Warmup: cfg.Warmup, CPUs: runtime.NumCPU(), Servers: results}
	return &lab.Report{
		JSON: doc,
		Table: func(w io.Writer) error {
			writeTable(w, results)
			_, err := fmt.Fprintf(w, "\ntotal %.1fs; %d CPUs; `cpusched lab http -c %d -n %d` (warm-up %d)\n",
				total.Seconds(), doc.CPUs, cfg.Concurrency, cfg.Requests, cfg.Warmup)
			return err
		},
		Plots: func(dir string) ([]string, error) { return writePlot(dir, cfg, results) },
	}, nil
}

// document is the -json document of `cpusched lab http`.
type document struct {
	Concurrency int      `json:"concurrency"`
	Requests    int      `json:"requests"`
	Warmup      int      `json:"warmup"`
	CPUs        int      `json:"cpus"`
	Servers     []Result `json:"servers"`
}

func writeTable(w io.Writer, results []Result) {
	t := report.NewTable("server", "req/s", "mean ms", "p50 ms", "p99 ms", "MiB/s", "peak RSS MB", "failed", "seed (2014)")
	for _, r := range results {
		if r.Skipped != "" || r.Summary == nil {
			t.Row(r.Label, r.Skipped, "", "", "", "", "", "", seedFigures[r.Server])
			continue
		}
		s := r.Summary
		t.Row(r.Label, report.Num(float64(int64(s.RPS+0.5))), report.Ms(s.MeanMs), report.Ms(s.P50Ms), report.Ms(s.P99Ms),
			report.Ms(s.TransferKBps/1024), report.Ms(float64(r.PeakRSSBytes)/1e6),
			report.Num(float64(s.Failed+s.Non2xx)), seedFigures[r.Server])
	}
	t.Write(w)
	fmt.Fprintln(w, "\nseed: 'Benchmarking Go, Scala and Node.js' (2014), `ab -c 100 -n 10000` on one host (2014); the Scala servers (Finagle, Spray) cannot be fetched here,")
	fmt.Fprintf(w, "  so the JDK's built-in com.sun.net.httpserver stands in for a JVM server. Ours differ: %d cores running the\n", runtime.NumCPU())
	fmt.Fprintln(w, "  load generator (Go, ~0.1 ms CPU more per request than ab) beside the server, and a different CPU, kernel and runtimes.")
	fmt.Fprintln(w, "  peak RSS is VmHWM of the server process; failed counts transport failures plus non-2xx responses.")
}

// writePlot writes DIR/http.png, req/s by server, if any server was
// measured, and returns the paths written.
func writePlot(dir string, cfg Config, results []Result) ([]string, error) {
	var cats []string
	var rps []float64
	for _, r := range results {
		if r.Summary != nil {
			cats = append(cats, r.Label)
			rps = append(rps, r.Summary.RPS)
		}
	}
	if len(cats) == 0 {
		return nil, nil
	}
	path := filepath.Join(dir, "http.png")
	title := fmt.Sprintf("lab http: 1 MiB responses, -c %d -n %d, %d CPUs", cfg.Concurrency, cfg.Requests, runtime.NumCPU())
	if err := report.BarPlot(path, title, "req/s", false, cats, []report.Bars{{Name: "req/s", Values: rps}}); err != nil {
		return nil, err
	}
	return []string{path}, nil
}

// child is `cpusched lab-child http NAME -addr ADDR`: one Go server, which
// prints its address and serves until interrupted.
func child(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return cli.Usagef("lab-child http: missing server name (valid: %s)", strings.Join(GoServers, ", "))
	}
	name := args[0]
	fs := cli.NewFlagSet("lab-child http "+name, stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address (loopback)")
	if err := cli.Parse(fs, args[1:]); err != nil {
		return err
	}
	if !slices.Contains(GoServers, name) {
		return cli.Usagef("lab-child http: unknown Go server %q (valid: %s)", name, strings.Join(GoServers, ", "))
	}
	return Serve(ctx, name, *addr, stdout)
}
