// Package sleep measures the cost of sleeping: workers that do a fixed amount
// of work and then wait, in a loop, with each of Go's ways to wait ("High
// CPU usage of scheduler?", the LKML "test_sleep" program, 2012).
//
// One cell is a method x a thread count x a mode (plain goroutines or
// goroutines locked to their OS threads). Each cell runs in its own child
// process (RunCell there), so every cell starts with a fresh runtime and its
// own CPU counters; Run in the parent starts the children one at a time.
package sleep

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/childproc"
)

// Methods are the valid wait methods, in the order tables list them:
//
//	none      no wait at all (the work alone)
//	sleep     time.Sleep(d)
//	timer     a reused *time.Timer: Reset(d), then receive from C
//	after     select on time.After(d)
//	nanosleep the nanosleep(2) system call (Linux)
//	select    the select(2) system call with no descriptors and a timeout (Linux)
//	poll      the ppoll(2) system call with no descriptors and a timeout (Linux; poll(2) takes whole ms)
//	gosched   runtime.Gosched() (no duration: gives up the P once)
//	yield     the sched_yield(2) system call (no duration; Linux)
//	chan      a channel hand-off: ask a peer goroutine, which sleeps d and answers on a channel
//	busy      spin on time.Now until d has passed
var Methods = []string{"none", "sleep", "timer", "after", "nanosleep", "select", "poll", "gosched", "yield", "chan", "busy"}

// Modes are the valid worker modes: plain goroutines, or goroutines that call
// runtime.LockOSThread for their whole life.
var Modes = []string{"goroutine", "locked"}

// Defaults of Config and of the CLI flags. One unit of work sums WorkKiB KiB
// of memory; Inner units make an iteration's work (300 x 4 KiB, as in the
// seed's `test_sleep 1000 10000 300 4`).
const (
	DefaultSleep   = time.Millisecond
	DefaultOuter   = 200
	DefaultInner   = 300
	DefaultWorkKiB = 4
	QuickOuter     = 20
	// MaxThreads bounds a cell's worker count.
	MaxThreads = 1024
)

// DefaultThreads returns the default thread counts: powers of two from 1 up to
// 4 x cpus (1, 2, 4, 8 on 2 CPUs).
func DefaultThreads(cpus int) []int {
	if cpus < 1 {
		cpus = 1
	}
	var ts []int
	for n := 1; n <= 4*cpus; n *= 2 {
		ts = append(ts, n)
	}
	return ts
}

// CellConfig is one measured cell, run in one process by RunCell.
type CellConfig struct {
	Method  string        // one of Methods
	Mode    string        // one of Modes
	Threads int           // workers, 1..MaxThreads
	Sleep   time.Duration // the wait per iteration, >= 0 (unused by none, gosched, yield)
	Outer   int           // iterations per worker, >= 1
	Inner   int           // work units per iteration, >= 0
	WorkKiB int           // KiB summed per work unit, >= 1
}

// Validate reports the first problem with c as an error naming the flag and
// its valid values.
func (c CellConfig) Validate() error {
	if !slices.Contains(Methods, c.Method) {
		return fmt.Errorf("-methods: unknown method %q (valid: %s)", c.Method, strings.Join(Methods, ", "))
	}
	if !slices.Contains(Modes, c.Mode) {
		return fmt.Errorf("-modes: unknown mode %q (valid: %s)", c.Mode, strings.Join(Modes, ", "))
	}
	if c.Threads < 1 || c.Threads > MaxThreads {
		return fmt.Errorf("-threads must be in 1..%d, got %d", MaxThreads, c.Threads)
	}
	return validateCommon(c.Sleep, c.Outer, c.Inner, c.WorkKiB)
}

func validateCommon(sleep time.Duration, outer, inner, workKiB int) error {
	switch {
	case sleep < 0:
		return fmt.Errorf("-sleep must be >= 0, got %v", sleep)
	case sleep > time.Second:
		return fmt.Errorf("-sleep must be <= 1s, got %v", sleep)
	case outer < 1:
		return fmt.Errorf("-outer must be >= 1, got %d", outer)
	case inner < 0:
		return fmt.Errorf("-inner must be >= 0, got %d", inner)
	case workKiB < 1 || workKiB > 1<<20:
		return fmt.Errorf("-work must be in 1..%d KiB, got %d", 1<<20, workKiB)
	}
	return nil
}

// Args returns the flags of `cpusched lab-child sleep` that describe c.
func (c CellConfig) Args() []string {
	return []string{
		"-method", c.Method, "-mode", c.Mode, "-threads", strconv.Itoa(c.Threads),
		"-sleep", c.Sleep.String(), "-outer", strconv.Itoa(c.Outer),
		"-inner", strconv.Itoa(c.Inner), "-work", strconv.Itoa(c.WorkKiB),
	}
}

// CellResult is the outcome of one cell. Times are microseconds per outer
// iteration of one worker, over all workers' iterations; CPU is the process's
// user and system CPU time divided by the number of iterations (threads x
// outer). Skipped, when set, says why the cell was not measured.
type CellResult struct {
	Method     string  `json:"method"`
	Mode       string  `json:"mode"`
	Threads    int     `json:"threads"`
	Iterations int     `json:"iterations"`
	MinUs      float64 `json:"min_us"`
	AvgUs      float64 `json:"avg_us"`
	MaxUs      float64 `json:"max_us"`
	StddevUs   float64 `json:"stddev_us"`
	UserUs     float64 `json:"user_us_per_iter"`
	SysUs      float64 `json:"sys_us_per_iter"`
	WallS      float64 `json:"wall_s"`
	Skipped    string  `json:"skipped,omitempty"`
}

// Stats are the min, mean, max and population standard deviation of samples.
// All are 0 for no samples.
type Stats struct{ Min, Avg, Max, Stddev float64 }

// ComputeStats returns the Stats of samples.
func ComputeStats(samples []float64) Stats {
	if len(samples) == 0 {
		return Stats{}
	}
	s := Stats{Min: samples[0], Max: samples[0]}
	var sum float64
	for _, v := range samples {
		sum += v
		s.Min = min(s.Min, v)
		s.Max = max(s.Max, v)
	}
	s.Avg = sum / float64(len(samples))
	var sq float64
	for _, v := range samples {
		d := v - s.Avg
		sq += d * d
	}
	s.Stddev = math.Sqrt(sq / float64(len(samples)))
	return s
}

// work sums units x len(buf) bytes with a multiply so the compiler keeps the
// loop, and returns the sum so the caller can keep it alive. It is the
// workload's counting part: it touches exactly units x len(buf) bytes.
func work(buf []byte, units int) uint64 {
	var h uint64
	for u := 0; u < units; u++ {
		for _, b := range buf {
			h = h*31 + uint64(b)
		}
	}
	return h
}

// waiter is one worker's wait method; it is built per worker so that per
// worker state (a timer, a peer goroutine) is not shared. stop releases it.
type waiter struct {
	wait func()
	stop func()
}

// checkSupported is supported, replaceable by tests of the skip path.
var checkSupported = supported

// supported returns nil if this system provides method, else the reason it
// does not (a method that needs a Linux system call, on another system).
func supported(method string) error {
	switch method {
	case "nanosleep", "select", "poll", "yield":
		_, err := sysWait(method, 0)
		return err
	}
	return nil
}

func newWaiter(method string, d time.Duration) (waiter, error) {
	noop := func() {}
	switch method {
	case "none":
		return waiter{noop, noop}, nil
	case "sleep":
		return waiter{func() { time.Sleep(d) }, noop}, nil
	case "timer":
		t := time.NewTimer(time.Hour)
		t.Stop()
		return waiter{func() { t.Reset(d); <-t.C }, func() { t.Stop() }}, nil
	case "after":
		return waiter{func() {
			// The method under test is the seed's "select on a timer
			// channel", so the one-case select is deliberate.
			//lint:ignore S1000,S1037 the select on time.After is what is measured
			select {
			case <-time.After(d):
			}
		}, noop}, nil
	case "gosched":
		return waiter{runtime.Gosched, noop}, nil
	case "chan":
		req, resp := make(chan struct{}), make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range req {
				time.Sleep(d)
				resp <- struct{}{}
			}
		}()
		return waiter{func() { req <- struct{}{}; <-resp }, func() { close(req); <-done }}, nil
	case "busy":
		return waiter{func() {
			for end := time.Now().Add(d); time.Now().Before(end); {
			}
		}, noop}, nil
	case "nanosleep", "select", "poll", "yield":
		w, err := sysWait(method, d)
		if err != nil {
			return waiter{}, err
		}
		return waiter{w, noop}, nil
	}
	return waiter{}, fmt.Errorf("-methods: unknown method %q (valid: %s)", method, strings.Join(Methods, ", "))
}

// RunCell runs one cell in the calling process: c.Threads workers each do
// c.Outer iterations of (c.Inner work units, one wait) and time every
// iteration. It is meant for a fresh child process, since the CPU figures are
// the whole process's. A method the system cannot provide gives a result with
// Skipped set and a nil error. Cancelling ctx stops the workers after their
// current iteration and returns ctx.Err().
func RunCell(ctx context.Context, c CellConfig) (CellResult, error) {
	res := CellResult{Method: c.Method, Mode: c.Mode, Threads: c.Threads}
	if err := c.Validate(); err != nil {
		return res, err
	}
	if err := checkSupported(c.Method); err != nil {
		res.Skipped = err.Error()
		return res, nil
	}
	samples := make([][]float64, c.Threads)
	var ready, wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, c.Threads)
	for i := range c.Threads {
		ready.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c.Mode == "locked" {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			buf := make([]byte, c.WorkKiB<<10)
			for j := range buf {
				buf[j] = byte(j)
			}
			w, err := newWaiter(c.Method, c.Sleep)
			if err != nil {
				errs[i] = err
				ready.Done()
				return
			}
			defer w.stop()
			s := make([]float64, 0, c.Outer)
			ready.Done()
			<-start
			for range c.Outer {
				if ctx.Err() != nil {
					break
				}
				t0 := time.Now()
				workSink.Add(work(buf, c.Inner))
				w.wait()
				s = append(s, float64(time.Since(t0).Nanoseconds())/1e3)
			}
			samples[i] = s
		}()
	}
	ready.Wait()
	u0, s0 := cpuTimes()
	t0 := time.Now()
	close(start)
	wg.Wait()
	res.WallS = time.Since(t0).Seconds()
	u1, s1 := cpuTimes()
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	all := make([]float64, 0, c.Threads*c.Outer)
	for _, s := range samples {
		all = append(all, s...)
	}
	st := ComputeStats(all)
	res.Iterations = len(all)
	res.MinUs, res.AvgUs, res.MaxUs, res.StddevUs = st.Min, st.Avg, st.Max, st.Stddev
	if n := float64(len(all)); n > 0 {
		res.UserUs = float64((u1 - u0).Nanoseconds()) / 1e3 / n
		res.SysUs = float64((s1 - s0).Nanoseconds()) / 1e3 / n
	}
	return res, nil
}

// Config is a whole sweep: every method x mode x thread count, each cell in
// its own child process.
type Config struct {
	Methods []string // each one of Methods; not empty
	Modes   []string // each one of Modes; not empty
	Threads []int    // each 1..MaxThreads; not empty
	Sleep   time.Duration
	Outer   int
	Inner   int
	WorkKiB int

	// Command builds the child that runs one cell, `cpusched lab-child
	// sleep ARGS` with the cell's Args.
	Command childproc.Command
	// Progress, if set, is called before each cell with its index, the
	// total and the cell.
	Progress func(i, n int, c CellConfig)
}

// Validate reports the first problem with c as an error naming the flag and
// its valid values.
func (c Config) Validate() error {
	if len(c.Methods) == 0 {
		return fmt.Errorf("-methods must not be empty (valid: %s)", strings.Join(Methods, ", "))
	}
	if len(c.Modes) == 0 {
		return fmt.Errorf("-modes must not be empty (valid: %s)", strings.Join(Modes, ", "))
	}
	if len(c.Threads) == 0 {
		return fmt.Errorf("-threads must not be empty (counts in 1..%d)", MaxThreads)
	}
	for _, m := range c.Methods {
		if !slices.Contains(Methods, m) {
			return fmt.Errorf("-methods: unknown method %q (valid: %s)", m, strings.Join(Methods, ", "))
		}
	}
	for _, m := range c.Modes {
		if !slices.Contains(Modes, m) {
			return fmt.Errorf("-modes: unknown mode %q (valid: %s)", m, strings.Join(Modes, ", "))
		}
	}
	for _, t := range c.Threads {
		if t < 1 || t > MaxThreads {
			return fmt.Errorf("-threads: each count must be in 1..%d, got %d", MaxThreads, t)
		}
	}
	return validateCommon(c.Sleep, c.Outer, c.Inner, c.WorkKiB)
}

// Cells returns the sweep's cells in run order: mode, then method, then
// thread count.
func (c Config) Cells() []CellConfig {
	var cells []CellConfig
	for _, mode := range c.Modes {
		for _, m := range c.Methods {
			for _, t := range c.Threads {
				cells = append(cells, CellConfig{Method: m, Mode: mode, Threads: t,
					Sleep: c.Sleep, Outer: c.Outer, Inner: c.Inner, WorkKiB: c.WorkKiB})
			}
		}
	}
	return cells
}

// waitCost is the estimated wall time of one wait of method for d.
func waitCost(method string, d time.Duration) time.Duration {
	switch method {
	case "none", "gosched", "yield":
		return 0
	}
	return d + 80*time.Microsecond // timer slack and wake-up
}

// Estimate returns the expected wall time of the sweep on cpus CPUs when one
// iteration's work takes workPer on one CPU: per cell, Outer iterations of
// the work (shared out over the CPUs) plus the wait (busy waits also compete
// for the CPUs), plus perCell for starting the child process.
func (c Config) Estimate(workPer time.Duration, cpus int, perCell time.Duration) time.Duration {
	if cpus < 1 {
		cpus = 1
	}
	var total time.Duration
	for _, cell := range c.Cells() {
		w := waitCost(cell.Method, cell.Sleep)
		var it time.Duration
		if cell.Method == "busy" {
			it = (workPer + w) * time.Duration(max(1, (cell.Threads+cpus-1)/cpus))
		} else {
			it = max(workPer*time.Duration(cell.Threads)/time.Duration(cpus), workPer) + w
		}
		total += time.Duration(cell.Outer)*it + perCell
	}
	return total
}

// workSink keeps the results of work alive so the compiler cannot drop it.
var workSink atomic.Uint64

// MeasureWork returns the time of one iteration's work (inner units of
// workKiB KiB) in the calling goroutine, the best of three.
func MeasureWork(inner, workKiB int) time.Duration {
	buf := make([]byte, workKiB<<10)
	for j := range buf {
		buf[j] = byte(j)
	}
	best := time.Duration(math.MaxInt64)
	for range 3 {
		t0 := time.Now()
		workSink.Add(work(buf, inner))
		best = min(best, time.Since(t0))
	}
	return best
}

// Run runs every cell of cfg, one child process at a time, and returns the
// results in Cells order. A child that fails gives an error naming its cell;
// the results measured before it are returned with it. Cancelling ctx kills
// the running child and returns ctx.Err().
func Run(ctx context.Context, cfg Config) ([]CellResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Command == nil {
		return nil, errors.New("sleep.Run: Config.Command is nil")
	}
	cells := cfg.Cells()
	results := make([]CellResult, 0, len(cells))
	for i, cell := range cells {
		if cfg.Progress != nil {
			cfg.Progress(i, len(cells), cell)
		}
		var r CellResult
		if err := childproc.Output(ctx, cfg.Command(ctx, cell.Args()...), &r); err != nil {
			if ctx.Err() != nil {
				return results, ctx.Err()
			}
			return results, fmt.Errorf("cell %s/%s/%d threads: %w", cell.Mode, cell.Method, cell.Threads, err)
		}
		results = append(results, r)
	}
	return results, nil
}

// errNotLinux is the skip reason of the system-call methods off Linux.
var errNotLinux = errors.New("skipped: not Linux")
