// Package priority is `cpusched lab priority`: CPU loops contending for one
// CPU under nice, SCHED_BATCH, SCHED_IDLE and SCHED_RR, the same with 1 ms
// sleeps, and cpusched's classes and nice levels on one worker ("Trying
// priorities", 2012).
package priority

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/childproc"
)

// Defaults and limits of Config.
const (
	DefaultTarget = 2 * time.Second        // one loop alone, when Loops is 0
	QuickTarget   = 300 * time.Millisecond // the same for -quick
	MaxTarget     = 5 * time.Second        // keeps the SCHED_RR child short
	DefaultSleeps = 2000
	QuickSleeps   = 500
	MaxSleeps     = 20000
	DefaultChunk  = 100000 // iterations between Checkpoints: a small part of a slice
	PinnedCPU     = 0      // the CPU every OS child is pinned to
)

// Config is one run of the experiment.
type Config struct {
	Loops    uint64        // iterations of Spin per copy; 0 means calibrate to Target
	Target   time.Duration // time of one loop alone when calibrating
	Sleeps   int           // 1 ms sleeps per copy in the sleep variant, 0 to skip it
	Policies []string      // OS rows, subset of Policies()
	Chunk    uint64        // cpusched: iterations between Checkpoints
	// Limit is how long an OS part may run before the copies still
	// running are killed and reported as unfinished; 0 means three times
	// the time all copies need one after another, plus 10 s.
	Limit time.Duration
	// Unprivileged makes the children behave as if they lacked
	// CAP_SYS_NICE (privileged settings fail with EPERM), to show the
	// skip path when running as root.
	Unprivileged bool
	// Command builds a child for args (the part after
	// `cpusched lab-child priority`).
	Command childproc.Command
	// Progress, if not nil, is called before each part with a status line.
	Progress func(format string, args ...any)
}

// Validate checks the fields and returns an error naming the flag.
func (c *Config) Validate() error {
	if len(c.Policies) == 0 {
		return fmt.Errorf("-policies: empty list (valid: %s)", strings.Join(Policies(), ","))
	}
	for _, p := range c.Policies {
		if !contains(Policies(), p) {
			return fmt.Errorf("-policies: unknown policy %q (valid: %s)", p, strings.Join(Policies(), ","))
		}
	}
	if c.Loops == 0 && (c.Target <= 0 || c.Target > MaxTarget) {
		return fmt.Errorf("-target: %v out of range (valid: 1ms..%v)", c.Target, MaxTarget)
	}
	if c.Sleeps < 0 || c.Sleeps > MaxSleeps {
		return fmt.Errorf("-sleeps: %d out of range (valid: 0..%d)", c.Sleeps, MaxSleeps)
	}
	if c.Chunk < 1 {
		return errors.New("-chunk: must be at least 1")
	}
	return nil
}

// OSRow is one OS child: the setting it asked for (Policy) and got (Label),
// or why it was skipped; its wall time from the common start signal, its
// thread's CPU time, and its finishing place (1 first) among the rows that
// ran (0 for a row that was skipped or did not finish).
type OSRow struct {
	Policy  string        `json:"policy"`
	Label   string        `json:"label,omitempty"`
	Skipped string        `json:"skipped,omitempty"`
	Wall    time.Duration `json:"wall_ns"`
	CPU     time.Duration `json:"cpu_ns"`
	Order   int           `json:"order,omitempty"`
	// Unfinished: killed after Wall without finishing (starved).
	Unfinished bool `json:"unfinished,omitempty"`
}

// Result is the whole experiment.
type Result struct {
	CPUs       int           `json:"cpus"`
	GoVersion  string        `json:"go_version"`
	Loops      uint64        `json:"loops"`
	Alone      time.Duration `json:"loop_alone_ns"` // calibrated time of one loop alone (0 if -loops was given)
	NsPerLoop  float64       `json:"ns_per_loop"`   // measured speed of the loop
	Sleeps     int           `json:"sleeps"`
	Chunk      uint64        `json:"chunk"`
	CPULoops   []OSRow       `json:"cpu_loops"`
	SleepLoops []OSRow       `json:"sleep_loops,omitempty"`
	Tasks      *TasksResult  `json:"cpusched_tasks,omitempty"`
}

// Run runs the three parts in order: the CPU loops, the sleep loops (if
// Sleeps > 0) and the cpusched tasks, each OS copy and the cpusched run in
// its own child process. It returns what was measured so far with the
// first error (a child that failed, ctx done).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Command == nil {
		return nil, errors.New("priority: Config.Command is nil")
	}
	progress := cfg.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	res := &Result{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Loops: cfg.Loops, Sleeps: cfg.Sleeps, Chunk: cfg.Chunk}
	progress("priority: calibrating the loop")
	perSecond := Calibrate(time.Second)
	res.NsPerLoop = 1e9 / float64(perSecond)
	if res.Loops == 0 {
		res.Loops = uint64(float64(perSecond) * cfg.Target.Seconds())
		res.Alone = cfg.Target
	}
	limit := func(one time.Duration) time.Duration {
		if cfg.Limit > 0 {
			return cfg.Limit
		}
		return 3*time.Duration(len(cfg.Policies))*one + 10*time.Second
	}
	progress("priority: %d CPU loops of %d iterations pinned to CPU %d", len(cfg.Policies), res.Loops, PinnedCPU)
	rows, err := runOS(ctx, cfg, "cpu", res.Loops, limit(time.Duration(float64(res.Loops)*res.NsPerLoop)))
	res.CPULoops = rows
	if err != nil {
		return res, err
	}
	if cfg.Sleeps > 0 {
		progress("priority: %d sleep loops of %d x 1 ms pinned to CPU %d", len(cfg.Policies), cfg.Sleeps, PinnedCPU)
		rows, err := runOS(ctx, cfg, "sleep", res.Loops, limit(time.Duration(cfg.Sleeps)*1200*time.Microsecond))
		res.SleepLoops = rows
		if err != nil {
			return res, err
		}
	}
	progress("priority: 3 cpusched tasks of %d iterations on one worker", res.Loops)
	cmd := cfg.Command(ctx, "-mode", "tasks", "-loops", strconv.FormatUint(res.Loops, 10), "-chunk", strconv.FormatUint(cfg.Chunk, 10))
	var tr TasksResult
	if err := childproc.Output(ctx, cmd, &tr); err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, fmt.Errorf("priority: cpusched child: %w", err)
	}
	res.Tasks = &tr
	return res, nil
}

// childReady is an OS child's first line; childDone its second.
type childReady struct {
	Label   string `json:"label,omitempty"`
	Skipped string `json:"skipped,omitempty"`
}

type childDone struct {
	Start int64 `json:"start_unix_ns"`
	End   int64 `json:"end_unix_ns"`
	CPU   int64 `json:"cpu_ns"`
}

type osChild struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr bytes.Buffer
	ready  childReady
	done   childDone
}

// runOS starts one child per policy, waits until each has pinned itself
// and set its priority, then tells them all to start at once and collects
// their times.
// A child that has not finished within limit (SCHED_IDLE starved by other
// processes on the CPU) is killed and its row marked Unfinished.
func runOS(ctx context.Context, cfg Config, mode string, loops uint64, limit time.Duration) ([]OSRow, error) {
	children := make([]*osChild, len(cfg.Policies))
	defer func() {
		for _, c := range children {
			if c != nil && c.cmd.Process != nil {
				c.stdin.Close()
				c.cmd.Process.Kill()
				c.cmd.Wait()
			}
		}
	}()
	for i, p := range cfg.Policies {
		args := []string{"-mode", mode, "-policy", p, "-loops", strconv.FormatUint(loops, 10), "-sleeps", strconv.Itoa(cfg.Sleeps)}
		if cfg.Unprivileged {
			args = append(args, "-unprivileged")
		}
		c := &osChild{cmd: cfg.Command(ctx, args...)}
		// One P, and no asynchronous preemption: the loop has no call, so
		// nothing makes its thread hand over to another (starved) thread.
		c.cmd.Env = append(c.cmd.Environ(), "GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1")
		c.cmd.Stderr = &c.stderr
		var err error
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			return nil, err
		}
		out, err := c.cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		c.stdout = bufio.NewReader(out)
		if err := c.cmd.Start(); err != nil {
			return nil, fmt.Errorf("priority: starting the %s child: %w", p, err)
		}
		children[i] = c
	}
	fail := func(c *osChild, what string, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("priority: %s child %s: %v: %s", c.cmd.Args[len(c.cmd.Args)-1], what, err, strings.TrimSpace(c.stderr.String()))
	}
	for _, c := range children {
		if err := childproc.ReadLine(c.stdout, &c.ready); err != nil {
			return nil, fail(c, "ready line", err)
		}
	}
	for _, c := range children {
		if c.ready.Skipped == "" {
			io.WriteString(c.stdin, "go\n")
		}
		c.stdin.Close()
	}
	goTime := time.Now().UnixNano()
	rows := make([]OSRow, len(children))
	type doneMsg struct {
		i    int
		done childDone
		err  error
	}
	results := make(chan doneMsg, len(children))
	waiting := 0
	for i, c := range children {
		rows[i] = OSRow{Policy: cfg.Policies[i], Label: c.ready.Label, Skipped: c.ready.Skipped}
		if c.ready.Skipped != "" {
			continue
		}
		waiting++
		go func() {
			var d childDone
			err := childproc.ReadLine(c.stdout, &d)
			results <- doneMsg{i, d, err}
		}()
	}
	finished := make([]bool, len(children))
	timer := time.NewTimer(limit)
	defer timer.Stop()
collect:
	for waiting > 0 {
		select {
		case m := <-results:
			waiting--
			if m.err != nil {
				return nil, fail(children[m.i], "result", m.err)
			}
			children[m.i].done, finished[m.i] = m.done, true
			if err := children[m.i].cmd.Wait(); err != nil {
				return nil, fail(children[m.i], "exit", err)
			}
			children[m.i].cmd.Process = nil // waited: nothing for the deferred cleanup
		case <-timer.C:
			break collect // the rest are killed by the deferred cleanup
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	start := goTime
	for i, c := range children {
		if finished[i] && c.done.Start < start {
			start = c.done.Start
		}
	}
	var ran []int
	for i, c := range children {
		switch {
		case rows[i].Skipped != "":
		case !finished[i]:
			rows[i].Unfinished, rows[i].Wall = true, limit
		default:
			rows[i].Wall = time.Duration(c.done.End - start)
			rows[i].CPU = time.Duration(c.done.CPU)
			ran = append(ran, i)
		}
	}
	rank(len(ran), func(k int) time.Duration { return rows[ran[k]].Wall }, func(k, o int) { rows[ran[k]].Order = o })
	return rows, nil
}

// ChildOS is an OS child (`cpusched lab-child priority -mode cpu|sleep`):
// on a locked thread it pins the process to PinnedCPU, applies policy,
// prints its ready line, waits for a line on in, runs the loop (Spin(loops)
// for mode "cpu", sleeps x 1 ms for "sleep") and prints its times.
func ChildOS(ctx context.Context, in io.Reader, out io.Writer, mode, policy string, loops uint64, sleeps int, unprivileged bool) error {
	if mode != "cpu" && mode != "sleep" {
		return fmt.Errorf("-mode: %q (valid: cpu, sleep, tasks)", mode)
	}
	errc := make(chan error, 1)
	go func() {
		// The thread keeps the setting: never unlock, so it exits with
		// the goroutine instead of running other goroutines.
		runtime.LockOSThread()
		errc <- childOSLocked(in, out, mode, policy, loops, sleeps, unprivileged)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func childOSLocked(in io.Reader, out io.Writer, mode, policy string, loops uint64, sleeps int, unprivileged bool) error {
	enc := json.NewEncoder(out)
	if osSupported != "" {
		return enc.Encode(childReady{Skipped: osSupported})
	}
	if err := pinProcess(PinnedCPU); err != nil {
		return enc.Encode(childReady{Skipped: err.Error()})
	}
	calls := realCalls
	if unprivileged {
		calls = denyPrivileged(calls)
	}
	label, skipped := applyPolicy(policy, gettid(), calls)
	if err := enc.Encode(childReady{Label: label, Skipped: skipped}); err != nil || skipped != "" {
		return err
	}
	if _, err := bufio.NewReader(in).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the start line: %w", err)
	}
	cpu0 := threadCPU()
	start := time.Now()
	if mode == "cpu" {
		sink.Add(Spin(loops, uint64(start.UnixNano())))
	} else {
		for range sleeps {
			sleep1ms()
		}
	}
	end := time.Now()
	return enc.Encode(childDone{Start: start.UnixNano(), End: end.UnixNano(), CPU: int64(threadCPU() - cpu0)})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
