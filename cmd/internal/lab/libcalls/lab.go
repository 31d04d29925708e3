package libcalls

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/cli"
	"github.com/cpusched/cpusched/cmd/internal/lab"
	"github.com/cpusched/cpusched/cmd/internal/report"
)

// Experiment returns `cpusched lab libcalls`: gzip and bcrypt calls, which
// cannot call Checkpoint, through httpsched against direct, beside a
// light route.
func Experiment() lab.Experiment {
	return lab.Experiment{
		Name:    "libcalls",
		Summary: "gzip and bcrypt calls, which cannot call Checkpoint, through httpsched (by hand, and by Auto) against direct, beside a 1 ms route",
		QuickHelp: fmt.Sprintf("short run: -runs %d, -window %v, -warmup %v (under 20 s)",
			QuickRuns, QuickWindow, QuickWarmup),
		OutHelp: "write libcalls.json and a bar chart of the probe's median p99 by step (libcalls.png) into this directory",
		New:     func() lab.Run { return &run{} },
		Child:   child,
	}
}

// run is one `cpusched lab libcalls`: its flags, then its Config.
type run struct {
	runs, clients, cost *int
	kinds               *string
	rate                *float64
	window, warmup      *time.Duration
	auto, floor         *bool
	privileged          *bool
	cfg                 Config
}

func (r *run) Flags(fs *flag.FlagSet) {
	r.runs = fs.Int("runs", DefaultRuns, fmt.Sprintf("runs, each with fresh servers; the table gives each and their medians (1..%d)", MaxRuns))
	r.kinds = fs.String("kinds", strings.Join(Kinds, ","), "comma-separated kinds of heavy call, all run at once in a step: "+strings.Join(Kinds, ", "))
	r.clients = fs.Int("clients", DefaultClients, fmt.Sprintf("closed-loop clients per kind (1..%d)", MaxClients))
	r.rate = fs.Float64("rate", DefaultRate, fmt.Sprintf("the probe's open-loop rate, requests/s (0..%d]", MaxRate))
	r.window = fs.Duration("window", DefaultWindow, fmt.Sprintf("each step's measured window (%v..%v)", MinWindow, MaxWindow))
	r.warmup = fs.Duration("warmup", DefaultWarmup, fmt.Sprintf("each step's load before its window (0s..%v)", MaxWarmup))
	r.cost = fs.Int("cost", DefaultCost, fmt.Sprintf("bcrypt cost (%d..%d); each step doubles a hash's work", MinCost, MaxCost))
	r.auto = fs.Bool("auto", true, "also measure auto: the probe and the same clients on a second server whose whole mux is wrapped in httpsched.Auto, no route marked by hand")
	r.floor = fs.Bool("floor", true, "also measure the floor: the same clients on a second server whose threads are all SCHED_IDLE")
	r.privileged = fs.Bool("privileged", false, "run as root, run the servers as root too; without it they run as uid 65534 without capabilities and with RLIMIT_NICE 0, as a container's service")
}

func (r *run) Setup(s lab.Setup) error {
	cfg := Config{Runs: *r.runs, Kinds: cli.SplitList(*r.kinds), Clients: *r.clients, Rate: *r.rate,
		Window: *r.window, Warmup: *r.warmup, Cost: *r.cost, Auto: *r.auto, Floor: *r.floor, Privileged: *r.privileged, Command: s.Child}
	if s.Quick {
		if !s.Given("runs") {
			cfg.Runs = QuickRuns
		}
		if !s.Given("window") {
			cfg.Window = QuickWindow
		}
		if !s.Given("warmup") {
			cfg.Warmup = QuickWarmup
		}
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if _, err := newLauncher(cfg.Privileged); err != nil {
		return err
	}
	steps := []string{StepIdle, StepDirect, StepSched}
	if cfg.Auto {
		steps = append(steps, StepAuto)
	}
	if cfg.Floor {
		steps = append(steps, StepFloor)
	}
	perStep := cfg.Warmup + cfg.Window
	fmt.Fprintf(s.Stderr, "lab libcalls: %d runs of %s; probe %v/s; %d clients per kind (%s); %v warm-up + %v window per step: about %v\n",
		cfg.Runs, strings.Join(steps, ", "), cfg.Rate, cfg.Clients, strings.Join(cfg.Kinds, ", "), cfg.Warmup, cfg.Window,
		(time.Duration(cfg.Runs) * (time.Duration(len(steps))*(perStep+time.Second) + 2*time.Second)).Round(time.Second))
	r.cfg = cfg
	return nil
}

func (r *run) Measure(ctx context.Context, progress func(string, ...any)) (*lab.Report, error) {
	start := time.Now()
	r.cfg.Progress = func(s string) { progress("lab libcalls: %s  (%s elapsed)", s, time.Since(start).Round(time.Second)) }
	res, runErr := Run(ctx, r.cfg)
	if res == nil || len(res.Runs) == 0 {
		return nil, runErr
	}
	doc := newDocument(r.cfg, res, time.Since(start))
	return &lab.Report{
		JSON:  doc,
		Table: doc.writeTable,
		Plots: doc.writePlot,
	}, runErr
}

// document is the -json document of `cpusched lab libcalls`: the
// configuration, every run, the medians and the targets.
type document struct {
	Runs       int          `json:"runs"`
	Kinds      []string     `json:"kinds"`
	Clients    int          `json:"clients_per_kind"`
	Rate       float64      `json:"probe_rate"`
	WindowS    float64      `json:"window_s"`
	WarmupS    float64      `json:"warmup_s"`
	Cost       int          `json:"bcrypt_cost"`
	Auto       bool         `json:"auto"`
	Floor      bool         `json:"floor"`
	Privileged bool         `json:"privileged"`
	CPUs       int          `json:"cpus"`
	Server     string       `json:"server"`
	TotalS     float64      `json:"total_s"`
	Results    []RunResult  `json:"results"`
	Medians    []StepMedian `json:"medians"`
	Targets    []Target     `json:"targets"`
	cfg        Config
	total      time.Duration
}

func newDocument(cfg Config, res *Results, total time.Duration) *document {
	return &document{
		Runs: cfg.Runs, Kinds: cfg.Kinds, Clients: cfg.Clients, Rate: cfg.Rate, WindowS: cfg.Window.Seconds(),
		WarmupS: cfg.Warmup.Seconds(), Cost: cfg.Cost, Auto: cfg.Auto, Floor: cfg.Floor, Privileged: cfg.Privileged,
		CPUs: runtime.NumCPU(), Server: res.Server, TotalS: total.Seconds(), Results: res.Runs,
		Medians: medians(res.Runs, cfg.Kinds), Targets: targets(res.Runs, cfg.Kinds), cfg: cfg, total: total,
	}
}

// writeTable writes every run's steps, their medians, what the runs were
// and the targets.
func (d *document) writeTable(w io.Writer) error {
	head := []string{"run", "step", "p50 ms", "p99 ms", "p99.9 ms", "probe/s", "p99 x idle"}
	for _, k := range d.Kinds {
		head = append(head, k+"/s", k+" % of direct")
	}
	head = append(head, "heavy failed")
	t := report.NewTable(head...)
	for _, r := range d.Results {
		for _, s := range r.Steps {
			row := []string{strconv.Itoa(r.Run), s.Step, report.Ms(s.Probe.P50Ms), report.Ms(s.Probe.P99Ms),
				report.Ms(s.Probe.P999Ms), report.Num(float64(int64(s.Probe.RPS + 0.5))), ratio(s.Step, s.P99XIdle)}
			var failed int64
			for _, kind := range d.Kinds {
				k := s.Kind(kind)
				if k == nil {
					row = append(row, "-", "-")
					continue
				}
				failed += k.Failed
				row = append(row, report.Ms(k.OpsPerS), pct(k.PctOfDirect))
			}
			if s.Heavy == nil {
				row = append(row, "-")
			} else {
				row = append(row, report.Num(float64(failed)))
			}
			t.Row(row...)
		}
	}
	for _, m := range d.Medians {
		row := []string{"median", m.Step, report.Ms(m.P50Ms), report.Ms(m.P99Ms), report.Ms(m.P999Ms),
			report.Num(float64(int64(m.ProbeRPS + 0.5))), ratio(m.Step, m.P99XIdle)}
		for _, kind := range d.Kinds {
			i := indexKind(m.Heavy, kind)
			if i < 0 {
				row = append(row, "-", "-")
				continue
			}
			row = append(row, report.Ms(m.Heavy[i].OpsPerS), pct(m.Heavy[i].PctOfDirect))
		}
		t.Row(append(row, "")...)
	}
	ew := report.NewErrWriter(w)
	t.Write(ew)
	d.writeNotes(ew)
	return ew.Err()
}

// writeNotes writes what the table's rows were and the targets.
func (d *document) writeNotes(ew *report.ErrWriter) {
	first := d.Results[0]
	h := first.Server
	ew.Printf("\nservers: %s; scheduler %s, %d workers, GOMAXPROCS %d, threads raisable: %v\n",
		d.Server, h.Isolation, h.Workers, h.GOMAXPROCS, h.ThreadsRaisable)
	var calls []string
	for _, k := range d.Kinds {
		switch k {
		case KindGzip:
			calls = append(calls, fmt.Sprintf("gzip = compress/gzip BestCompression of %d MiB of log lines", PayloadSize>>20))
		case KindBcrypt:
			calls = append(calls, fmt.Sprintf("bcrypt = GenerateFromPassword at cost %d", d.Cost))
		}
	}
	ew.Printf("heavy: %d closed-loop clients per kind, the kinds at once: %s; no Checkpoint in either\n", d.Clients, strings.Join(calls, "; "))
	ew.Printf("  direct: on the handler's goroutine; sched: httpsched.Handler over cpusched.New(), the same handler\n")
	ew.Printf("probe: GET %s (a %v sleep) open loop at %v/s, latency from each request's due time; each step %v warm-up, then %v window\n",
		pathFast, fastSleep, d.Rate, d.cfg.Warmup, d.cfg.Window)
	d.writeAutoNotes(ew)
	for _, r := range d.Results {
		switch {
		case r.Floor != nil && r.Run == first.Run:
			ew.Printf("floor: the same clients on a second server, its %d threads SCHED_IDLE (checked after the step)\n", r.Floor.IdleThreads)
		case r.FloorSkipped != "" && r.Run == first.Run:
			ew.Printf("floor: skipped: %s\n", r.FloorSkipped)
		}
	}
	var contended []string
	for _, r := range d.Results {
		for _, step := range []string{StepSched, StepAuto} {
			if s := r.Step(step); s != nil && s.ContendedS > 0 {
				contended = append(contended, fmt.Sprintf("run %d %s %.1fs", r.Run, step, s.ContendedS))
			}
		}
	}
	if len(contended) > 0 {
		ew.Printf("the scheduler ran contended (other processes kept the CPUs busy) during the windows: %s\n", strings.Join(contended, ", "))
	}
	for _, t := range d.Targets {
		op, verdict := ">=", "met"
		if t.AtMost {
			op = "<="
		}
		if !t.Met {
			verdict = "missed"
		}
		var vals []string
		for _, v := range t.Values {
			vals = append(vals, report.Ms(v))
		}
		ew.Printf("target: %s %s %v: median %s of %s, %s\n", t.What, op, t.Limit, report.Ms(t.Median), strings.Join(vals, ", "), verdict)
	}
	ew.Printf("total %.0fs; %d CPUs; `cpusched lab libcalls -runs %d -kinds %s -clients %d -rate %v -window %v -warmup %v -cost %d -auto=%v -floor=%v`\n",
		d.total.Seconds(), d.CPUs, d.Runs, strings.Join(d.Kinds, ","), d.Clients, d.Rate, d.cfg.Window, d.cfg.Warmup, d.Cost, d.Auto, d.Floor)
}

// writeAutoNotes writes what the auto step was, its probe's p99 against
// the sched and floor steps', and each run's routes as Auto classified
// them.
func (d *document) writeAutoNotes(ew *report.ErrWriter) {
	var autoRuns []RunResult
	for _, r := range d.Results {
		if r.Auto != nil && r.Step(StepAuto) != nil {
			autoRuns = append(autoRuns, r)
		}
	}
	if len(autoRuns) == 0 {
		return
	}
	ew.Printf("auto: the probe and the same clients on a second server, its direct routes and /fast in one ServeMux wrapped in httpsched.Auto(s, mux) over its own cpusched.New() (%s, %d workers)\n",
		autoRuns[0].Auto.Isolation, autoRuns[0].Auto.Workers)
	var xSched, xFloor []string
	for _, r := range autoRuns {
		s := r.Step(StepAuto)
		xSched = append(xSched, ratio(StepAuto, s.P99XSched))
		xFloor = append(xFloor, ratio(StepAuto, s.P99XFloor))
	}
	for _, m := range d.Medians {
		if m.Step == StepAuto {
			ew.Printf("  probe p99 x sched: median %s of %s; x floor: median %s of %s\n", ratio(StepAuto, m.P99XSched), strings.Join(xSched, ", "),
				ratio(StepAuto, m.P99XFloor), strings.Join(xFloor, ", "))
		}
	}
	for _, r := range autoRuns {
		var routes []string
		for _, rt := range r.Step(StepAuto).Routes {
			class := "light"
			if rt.Heavy {
				class = "heavy"
			}
			routes = append(routes, fmt.Sprintf("%s %s %sms (%d of %d sampled, %d moves)", rt.Route, class, report.Ms(rt.CPUMs), rt.Sampled, rt.Requests, rt.Moves))
		}
		if len(routes) == 0 {
			routes = append(routes, "none reported")
		}
		ew.Printf("  run %d routes, CPU per request: %s\n", r.Run, strings.Join(routes, "; "))
	}
}

// ratio formats a step's p99 over idle's: "-" for the idle step itself.
func ratio(step string, v float64) string {
	if step == StepIdle || v == 0 {
		return "-"
	}
	return report.Ms(v) + "x"
}

func pct(v *float64) string {
	if v == nil {
		return "-"
	}
	return report.Pct(*v)
}

func indexKind(ks []KindMedian, kind string) int {
	for i, k := range ks {
		if k.Kind == kind {
			return i
		}
	}
	return -1
}

// writePlot writes DIR/libcalls.png, the probe's median p99 by step, and
// returns the path written.
func (d *document) writePlot(dir string) ([]string, error) {
	var cats []string
	var p99 []float64
	for _, m := range d.Medians {
		cats = append(cats, m.Step)
		p99 = append(p99, m.P99Ms)
	}
	path := filepath.Join(dir, "libcalls.png")
	title := fmt.Sprintf("lab libcalls: probe p99 beside %s calls (median of %d runs), %d CPUs", strings.Join(d.Kinds, " and "), len(d.Results), d.CPUs)
	if err := report.BarPlot(path, title, "probe p99, ms", true, cats, []report.Bars{{Name: "p99", Values: p99}}); err != nil {
		return nil, err
	}
	return []string{path}, nil
}

// child is `cpusched lab-child libcalls serve -addr ADDR -cost N
// [-auto | -floor]`: a server, which prints its Hello and serves until
// interrupted.
func child(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "serve" {
		return cli.Usagef("lab-child libcalls: want the command serve, got %q", args)
	}
	fs := cli.NewFlagSet("lab-child libcalls serve", stderr)
	cfg := ServeConfig{}
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:0", "listen address (loopback)")
	fs.IntVar(&cfg.Cost, "cost", DefaultCost, fmt.Sprintf("bcrypt cost (%d..%d)", MinCost, MaxCost))
	fs.BoolVar(&cfg.Floor, "floor", false, "the floor's server: every thread SCHED_IDLE, direct routes only")
	fs.BoolVar(&cfg.Auto, "auto", false, "the auto server: direct routes only, the whole mux wrapped in httpsched.Auto")
	if err := cli.Parse(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("lab-child libcalls serve: unexpected argument %q", fs.Arg(0))
	}
	if cfg.Cost < MinCost || cfg.Cost > MaxCost {
		return cli.Usagef("-cost must be in %d..%d, got %d", MinCost, MaxCost, cfg.Cost)
	}
	if cfg.Floor && cfg.Auto {
		return cli.Usagef("lab-child libcalls serve: -floor and -auto exclude each other")
	}
	return Serve(ctx, cfg, stdout)
}
