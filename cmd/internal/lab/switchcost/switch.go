// Package switchcost is `cpusched lab switch`: the cost of goroutine
// switching ("Goroutines don't scale", 2017) over a sweep of GOMAXPROCS and
// buffers, one child process per cell. (switch is a Go keyword, hence the
// package's name.)
package switchcost

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/childproc"
	"github.com/cpusched/cpusched/cmd/internal/sysstat"
)

// Defaults and limits of Config.
const (
	DefaultClients  = 100
	MaxClients      = 100000
	DefaultDuration = 1500 * time.Millisecond
	QuickDuration   = 400 * time.Millisecond
	MinDuration     = 100 * time.Millisecond
	MaxDuration     = time.Minute
	// Budget is the longest a default sweep may take; Config.Plan shortens
	// the per-cell duration (not below MinDuration) to fit it.
	Budget = 100 * time.Second
	// QuickBudget is the same for -quick.
	QuickBudget = 15 * time.Second
	// cellOverhead is the measured cost of one child (exec, startup, JSON).
	cellOverhead = 150 * time.Millisecond
	MaxProcs     = 1024
)

// DefaultBuffers are the seed's buffer sizes.
var DefaultBuffers = []int{0, 1000}

// DefaultProcs returns the default GOMAXPROCS sweep for a machine with cpus
// CPUs: every value from 1 to 2*cpus when that is at most 8, otherwise the
// powers of two up to 2*cpus plus cpus itself. With quick it is 1 and cpus
// (1 and 2 on a one-CPU machine).
func DefaultProcs(cpus int, quick bool) []int {
	cpus = max(cpus, 1)
	if quick {
		if cpus == 1 {
			return []int{1, 2}
		}
		return []int{1, cpus}
	}
	if 2*cpus <= 8 {
		p := make([]int, 0, 2*cpus)
		for i := 1; i <= 2*cpus; i++ {
			p = append(p, i)
		}
		return p
	}
	var p []int
	for i := 1; i <= 2*cpus; i *= 2 {
		if i > cpus && (len(p) == 0 || p[len(p)-1] < cpus) {
			p = append(p, cpus)
		}
		p = append(p, i)
	}
	if p[len(p)-1] != 2*cpus {
		p = append(p, 2*cpus)
	}
	return p
}

// Config is one sweep. Every list must be non-empty; Validate says which
// field is wrong.
type Config struct {
	Workloads []string      // subset of Workloads()
	Procs     []int         // GOMAXPROCS values, 1..MaxProcs
	Clients   int           // goroutines (pairs, tasks) per cell, 1..MaxClients
	Buffers   []int         // >= 0
	Duration  time.Duration // per cell, MinDuration..MaxDuration
	// Command builds the child process for args (the part after
	// `cpusched lab-child switch`); Run adds GOMAXPROCS to its environment.
	Command childproc.Command
	// Progress, if not nil, is called before each cell with a status line.
	Progress func(format string, args ...any)
}

// Validate checks the fields' ranges and returns an error naming the flag.
func (c *Config) Validate() error {
	if len(c.Workloads) == 0 {
		return fmt.Errorf("-workloads: empty list (valid: %s)", strings.Join(Workloads(), ","))
	}
	for _, w := range c.Workloads {
		if !contains(Workloads(), w) {
			return fmt.Errorf("-workloads: unknown workload %q (valid: %s)", w, strings.Join(Workloads(), ","))
		}
	}
	if len(c.Procs) == 0 {
		return errors.New("-procs: empty list (valid: integers 1..1024)")
	}
	for _, p := range c.Procs {
		if p < 1 || p > MaxProcs {
			return fmt.Errorf("-procs: %d out of range (valid: 1..%d)", p, MaxProcs)
		}
	}
	if c.Clients < 1 || c.Clients > MaxClients {
		return fmt.Errorf("-clients: %d out of range (valid: 1..%d)", c.Clients, MaxClients)
	}
	if len(c.Buffers) == 0 {
		return errors.New("-buffer: empty list (valid: integers >= 0)")
	}
	for _, b := range c.Buffers {
		if b < 0 {
			return fmt.Errorf("-buffer: %d is negative (valid: integers >= 0)", b)
		}
	}
	if c.Duration < MinDuration || c.Duration > MaxDuration {
		return fmt.Errorf("-duration: %v out of range (valid: %v..%v)", c.Duration, MinDuration, MaxDuration)
	}
	return nil
}

// Spec is one cell of the sweep: what one child process runs.
type Spec struct {
	Workload string `json:"workload"`
	Procs    int    `json:"procs"`
	Clients  int    `json:"clients"`
	Buffer   int    `json:"buffer"` // -1: the workload ignores it (busy)
}

// Cells returns the sweep's cells in run order: for each workload, each
// procs value and each buffer (once with Buffer -1 for Busy).
func (c *Config) Cells() []Spec {
	var cells []Spec
	for _, w := range c.Workloads {
		for _, p := range c.Procs {
			if !usesBuffer(w) {
				cells = append(cells, Spec{Workload: w, Procs: p, Clients: c.Clients, Buffer: -1})
				continue
			}
			for _, b := range c.Buffers {
				cells = append(cells, Spec{Workload: w, Procs: p, Clients: c.Clients, Buffer: b})
			}
		}
	}
	return cells
}

// FitDuration returns d shortened so that cells cells (each d plus the
// child's start-up overhead) fit in budget, but not below MinDuration.
func FitDuration(d time.Duration, cells int, budget time.Duration) time.Duration {
	if cells <= 0 {
		return d
	}
	perCell := budget/time.Duration(cells) - cellOverhead
	if d > perCell {
		d = max(perCell, MinDuration)
	}
	return d.Round(10 * time.Millisecond)
}

// Cell is one measured cell: machine-wide CPU breakdown (like mpstat's "all"
// row) and context switches, the child's own context switches, and the
// operations per second. Skipped, when set, says why the cell was not
// measured and the numbers are zero.
type Cell struct {
	Spec
	Seconds        float64 `json:"seconds"`
	Ops            uint64  `json:"ops"`
	OpsPerSec      float64 `json:"ops_per_sec"`
	Usr            float64 `json:"usr_pct"`
	Sys            float64 `json:"sys_pct"`
	Idle           float64 `json:"idle_pct"`
	IOWait         float64 `json:"iowait_pct"`
	CtxPerSec      float64 `json:"ctx_switches_per_sec"`
	VolPerSec      float64 `json:"process_voluntary_per_sec"`
	InvolPerSec    float64 `json:"process_involuntary_per_sec"`
	ProcCPUPercent float64 `json:"process_cpu_pct"`
	// OpsPerCPUSec is operations per second of the child's own CPU time:
	// the cost of an operation, less sensitive than OpsPerSec to other
	// processes taking the CPUs.
	OpsPerCPUSec float64 `json:"ops_per_cpu_sec"`
	Skipped      string  `json:"skipped,omitempty"`
}

// Result is a whole sweep.
type Result struct {
	CPUs      int           `json:"cpus"`
	GoVersion string        `json:"go_version"`
	Duration  time.Duration `json:"cell_duration_ns"`
	Cells     []Cell        `json:"cells"`
}

// Measure runs one cell in the calling process (the child): it sets
// GOMAXPROCS to s.Procs, samples /proc/stat and getrusage (every thread of
// the process, which /proc/self/status does not count), runs the
// workload for d and samples again. On failure it returns the error and a
// zero Cell.
func Measure(ctx context.Context, s Spec, d time.Duration) (Cell, error) {
	runtime.GOMAXPROCS(s.Procs)
	r, err := sysstat.NewReader("")
	if err != nil {
		return Cell{}, err
	}
	sys0, err := r.Sample()
	if err != nil {
		return Cell{}, err
	}
	ru0 := selfUsage()
	ops, err := RunWorkload(ctx, s.Workload, s.Procs, s.Clients, max(s.Buffer, 0), d)
	if err != nil {
		return Cell{}, err
	}
	sys1, err := r.Sample()
	if err != nil {
		return Cell{}, err
	}
	ru1 := selfUsage()
	return cellFrom(s, ops, sys1.Since(sys0), ru0, ru1), nil
}

// cellFrom computes a cell from the machine's usage and two getrusage
// samples of the child around the workload.
func cellFrom(s Spec, ops uint64, u sysstat.Usage, ru0, ru1 rusage) Cell {
	c := Cell{
		Spec: s, Seconds: u.Seconds, Ops: ops,
		Usr: u.Usr, Sys: u.Sys, Idle: u.Idle, IOWait: u.IOWait, CtxPerSec: u.CtxSwitchesPerSec,
	}
	if u.Seconds > 0 {
		c.OpsPerSec = float64(ops) / u.Seconds
		if ru0.ok && ru1.ok {
			c.VolPerSec = float64(max(ru1.vol-ru0.vol, 0)) / u.Seconds
			c.InvolPerSec = float64(max(ru1.invol-ru0.invol, 0)) / u.Seconds
			cpu := max(ru1.cpu-ru0.cpu, 0).Seconds()
			c.ProcCPUPercent = 100 * cpu / u.Seconds
			if cpu > 0 {
				c.OpsPerCPUSec = float64(ops) / cpu
			}
		}
	}
	return c
}

// ChildArgs returns the arguments of the child that measures s for d
// (`cpusched lab-child switch ARGS`).
func ChildArgs(s Spec, d time.Duration) []string {
	return []string{"-workload", s.Workload, "-procs", strconv.Itoa(s.Procs), "-clients", strconv.Itoa(s.Clients),
		"-buffer", strconv.Itoa(s.Buffer), "-duration", d.String()}
}

// Run measures every cell of cfg, each in its own child process, in order.
// It stops at the first child that fails or when ctx is done, and returns
// the cells measured so far with the error.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Command == nil {
		return nil, errors.New("switch: Config.Command is nil")
	}
	res := &Result{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Duration: cfg.Duration}
	cells := cfg.Cells()
	for i, s := range cells {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if cfg.Progress != nil {
			cfg.Progress("switch: cell %d/%d: %s procs=%d buffer=%s (%v each)", i+1, len(cells), s.Workload, s.Procs, bufferLabel(s.Buffer), cfg.Duration)
		}
		c, err := runChild(ctx, cfg, s)
		if err != nil {
			return res, err
		}
		res.Cells = append(res.Cells, c)
	}
	return res, nil
}

func runChild(ctx context.Context, cfg Config, s Spec) (Cell, error) {
	cmd := cfg.Command(ctx, ChildArgs(s, cfg.Duration)...)
	cmd.Env = append(cmd.Environ(), "GOMAXPROCS="+strconv.Itoa(s.Procs))
	var c Cell
	if err := childproc.Output(ctx, cmd, &c); err != nil {
		if ctx.Err() != nil {
			return Cell{}, ctx.Err()
		}
		return Cell{}, fmt.Errorf("switch: child %s procs=%d buffer=%d: %w", s.Workload, s.Procs, s.Buffer, err)
	}
	return c, nil
}

// ParseInts parses a comma-separated list of integers ("1,2, 4"); an empty
// list or a non-integer is an error naming flag.
func ParseInts(flag, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not an integer", flag, f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: empty list", flag)
	}
	return out, nil
}

func bufferLabel(b int) string {
	if b < 0 {
		return "-"
	}
	return strconv.Itoa(b)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
