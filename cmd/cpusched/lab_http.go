package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	httplab "github.com/cpusched/cpusched/internal/lab/http"
	"github.com/cpusched/cpusched/internal/report"
)

// httpSeed is the seed's table ("Benchmarking Go, Scala and Node.js", 2014, `ab -c 100 -n 10000`,
// same host, 2014): req/s, mean latency and peak RSS by server.
var httpSeed = map[string]string{
	"go":      "Go net/http 2,319 req/s, 43 ms, 8 MB",
	"martini": "Martini 2,102 req/s, 9 MB",
	"node":    "Node.js 2,301 req/s, 57 MB",
	"jvm":     "Scala/Finagle 1,302, 808 MB; Spray 1,617, 833 MB",
}

// labHTTPLookPath finds node, javac and java; tests replace it to take the
// skip path.
var labHTTPLookPath = exec.LookPath

// runLabHTTP is `cpusched lab http [flags]`.
func runLabHTTP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("lab http", stderr)
	servers := fs.String("servers", strings.Join(httplab.Servers, ","), "comma-separated servers: "+strings.Join(httplab.Servers, ", "))
	conc := fs.Int("c", httplab.DefaultConcurrency, "concurrent connections (ab -c)")
	n := fs.Int("n", httplab.DefaultRequests, "measured requests per server (ab -n)")
	warmup := fs.Int("warmup", httplab.DefaultWarmup, "requests sent before each measured run")
	quick := fs.Bool("quick", false, fmt.Sprintf("short run: -n %d (under 20 s)", httplab.QuickRequests))
	jsonPath := fs.String("json", "", "also write the results as JSON to this file (- for stdout, instead of the table)")
	outDir := fs.String("out", "", "write http.json and a req/s bar chart (http.png) into this directory")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	cfg := httplab.Config{Servers: labSplit(*servers), Concurrency: *conc, Requests: *n, Warmup: *warmup,
		LookPath: labHTTPLookPath}
	if *quick {
		if !labFlagGiven(fs, "n") {
			cfg.Requests = httplab.QuickRequests
		}
		if !labFlagGiven(fs, "warmup") {
			cfg.Warmup = 200
		}
	}
	if err := cfg.Validate(); err != nil {
		return usagef("%v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.Exe = exe
	fmt.Fprintf(stderr, "lab http: %d servers, one at a time: %d warm-up + %d requests of 1 MiB at -c %d each\n",
		len(cfg.Servers), cfg.Warmup, cfg.Requests, cfg.Concurrency)
	prog := report.NewProgress(stderr)
	start := time.Now()
	cfg.Progress = func(s string) { prog.Set("lab http: %s  (%s elapsed)", s, time.Since(start).Round(time.Second)) }
	results, err := httplab.Run(ctx, cfg)
	prog.Done()
	if err != nil {
		return err
	}
	total := time.Since(start)
	out := httpOutput{Concurrency: cfg.Concurrency, Requests: cfg.Requests, Warmup: cfg.Warmup, CPUs: runtime.NumCPU(), Servers: results}
	if err := labWriteOutputs(out, *jsonPath, *outDir, "http.json", stdout, func(w io.Writer) error {
		writeHTTPTable(w, results)
		_, err := fmt.Fprintf(w, "\ntotal %.1fs; %d CPUs; `cpusched lab http -c %d -n %d` (warm-up %d)\n",
			total.Seconds(), runtime.NumCPU(), cfg.Concurrency, cfg.Requests, cfg.Warmup)
		return err
	}); err != nil {
		return err
	}
	if *outDir != "" {
		var cats []string
		var rps []float64
		for _, r := range results {
			if r.Summary != nil {
				cats = append(cats, r.Label)
				rps = append(rps, r.Summary.RPS)
			}
		}
		if len(cats) > 0 {
			path := filepath.Join(*outDir, "http.png")
			title := fmt.Sprintf("lab http: 1 MiB responses, -c %d -n %d, %d CPUs", cfg.Concurrency, cfg.Requests, runtime.NumCPU())
			if err := report.BarPlot(path, title, "req/s", false, cats, []report.Bars{{Name: "req/s", Values: rps}}); err != nil {
				return err
			}
			if *jsonPath != "-" {
				fmt.Fprintf(stdout, "wrote %s\n", path)
			}
		}
	}
	return nil
}

// httpOutput is the -json document of lab http.
type httpOutput struct {
	Concurrency int              `json:"concurrency"`
	Requests    int              `json:"requests"`
	Warmup      int              `json:"warmup"`
	CPUs        int              `json:"cpus"`
	Servers     []httplab.Result `json:"servers"`
}

func writeHTTPTable(w io.Writer, results []httplab.Result) {
	t := report.NewTable("server", "req/s", "mean ms", "p50 ms", "p99 ms", "MiB/s", "peak RSS MB", "failed", "seed (2014)")
	for _, r := range results {
		if r.Skipped != "" || r.Summary == nil {
			t.Row(r.Label, r.Skipped, "", "", "", "", "", "", httpSeed[r.Server])
			continue
		}
		s := r.Summary
		t.Row(r.Label, report.Num(float64(int64(s.RPS+0.5))), report.Ms(s.MeanMs), report.Ms(s.P50Ms), report.Ms(s.P99Ms),
			report.Ms(s.TransferKBps/1024), report.Ms(float64(r.PeakRSSBytes)/1e6),
			report.Num(float64(s.Failed+s.Non2xx)), httpSeed[r.Server])
	}
	t.Write(w)
	fmt.Fprintln(w, "\nseed: 'Benchmarking Go, Scala and Node.js' (2014), `ab -c 100 -n 10000` on one host (2014); the Scala servers (Finagle, Spray) cannot be fetched here,")
	fmt.Fprintf(w, "  so the JDK's built-in com.sun.net.httpserver stands in for a JVM server. Ours differ: %d cores running the\n", runtime.NumCPU())
	fmt.Fprintln(w, "  load generator (Go, ~0.1 ms CPU more per request than ab) beside the server, and a different CPU, kernel and runtimes.")
	fmt.Fprintln(w, "  peak RSS is VmHWM of the server process; failed counts transport failures plus non-2xx responses.")
}

// childLabHTTP is `cpusched lab-child http NAME -addr ADDR`: one Go server,
// which prints its address and serves until interrupted.
func childLabHTTP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("lab-child http: missing server name (valid: %s)", strings.Join(httplab.GoServers, ", "))
	}
	name := args[0]
	fs := newFlagSet("lab-child http "+name, stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address (loopback)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	valid := false
	for _, s := range httplab.GoServers {
		valid = valid || s == name
	}
	if !valid {
		return usagef("lab-child http: unknown Go server %q (valid: %s)", name, strings.Join(httplab.GoServers, ", "))
	}
	return httplab.Serve(ctx, name, *addr, stdout)
}
