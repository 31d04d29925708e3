// Package hogproc runs CPU load in a process of its own for `cpusched
// bench`: the demo server's CRC32 passes, in the same jobs on as many
// goroutines as asked, in one of two roles.
//
//   - The floor's hog (`cpusched idle-hog -c N`, Command): every thread is
//     SCHED_IDLE, so the kernel runs that work only when no other thread
//     wants a CPU, and what a server beside it gets is the most any
//     scheduler inside the server could give it: the floor the bench
//     measures the isolation modes against (docs/bench.md#the-floor).
//     Before it starts any work it makes every thread it has SCHED_IDLE;
//     threads the runtime starts later are cloned from those and inherit
//     the policy.
//   - The neighbour (`cpusched neighbor -c N`, NeighborCommand): the same
//     work at normal priority, as another service or a batch job sharing
//     the machine would run it.
//
// Flags shape the jobs (Jobs): longer calls among them, and a rest after
// each, as the tenants step's floor runs a tenant's work in a process of
// its own (one per tenant).
//
// Either talks with its parent one JSON line at a time: its first line on
// stdout is a Hello, and every command the parent writes on its stdin
// ("run", "pause", "count") is answered by a Count. It exits when its
// stdin closes. Start, in the parent, runs the other side.
package hogproc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/cli"
	"github.com/cpusched/cpusched/cmd/internal/demo"
)

// Command is the hidden command that runs the floor's hog: `cpusched
// idle-hog`; NeighborCommand the one that runs the neighbour, `cpusched
// neighbor`.
const (
	Command         = "idle-hog"
	NeighborCommand = "neighbor"
)

// MaxConcurrency bounds -c, as the bench bounds its CPU-heavy load's.
const MaxConcurrency = 1000

// The commands of the conversation, one per line on the child's stdin.
const (
	cmdRun   = "run"   // start (or go on with) the passes
	cmdPause = "pause" // stop after the pass each goroutine is in
	cmdCount = "count" // only report
)

// ErrNoSchedIdle is wrapped by Start's error when the child could not make
// its threads SCHED_IDLE (not Linux, or a sandbox that forbids
// sched_setattr): there is no floor to measure then.
var ErrNoSchedIdle = errors.New("the hog's threads cannot be made SCHED_IDLE here")

// Hello is the child's first line: how many threads it lowered, or why it
// could not.
type Hello struct {
	Threads     int    `json:"threads"`
	Error       string `json:"error,omitempty"`
	NoSchedIdle bool   `json:"no_sched_idle,omitempty"` // Error is ErrNoSchedIdle's
}

// Count is the child's answer to every command: the passes done since it
// started, at its own uptime, so that a rate over two answers does not
// depend on how late each was read.
type Count struct {
	Passes  int64   `json:"passes"`
	UptimeS float64 `json:"uptime_s"`
	Running bool    `json:"running"`
	Error   string  `json:"error,omitempty"` // an unknown command
}

// PassesPerSecondSince returns the passes per second between two answers,
// 0 if the clock or the count did not move forward.
func (c Count) PassesPerSecondSince(earlier Count) float64 {
	sec := c.UptimeS - earlier.UptimeS
	if sec <= 0 || c.Passes < earlier.Passes {
		return 0
	}
	return float64(c.Passes-earlier.Passes) / sec
}

// Main is `cpusched idle-hog -c N`: it lowers every thread, says so on
// stdout, and then answers the commands on stdin until it closes or ctx
// ends. Nothing runs before the first "run".
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return serve(ctx, Command, args, stdin, stdout, stderr, lowerAll)
}

// NeighborMain is `cpusched neighbor -c N`: Main's conversation with its
// threads left at the priority they were started with (its Hello says 0
// threads lowered).
func NeighborMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return serve(ctx, NeighborCommand, args, stdin, stdout, stderr, func() (int, error) { return 0, nil })
}

// serve is Main and NeighborMain, as the command name, with the lowering
// of the threads given, so that a test can take the path where it fails.
func serve(ctx context.Context, name string, args []string, stdin io.Reader, stdout, stderr io.Writer, lower func() (int, error)) error {
	started := time.Now()
	fs := cli.NewFlagSet(name, stderr)
	c := fs.Int("c", 10, fmt.Sprintf("goroutines running the passes (1..%d)", MaxConcurrency))
	jobs := DefaultJobs()
	jobs.addFlags(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("takes no arguments, got %q", fs.Args())
	}
	if *c < 1 || *c > MaxConcurrency {
		return cli.Usagef("-c must be in 1..%d, got %d", MaxConcurrency, *c)
	}
	if err := jobs.Validate(); err != nil {
		return cli.Usagef("%v", err)
	}
	enc := json.NewEncoder(stdout)
	threads, err := lower()
	if err != nil {
		_ = enc.Encode(Hello{Error: err.Error(), NoSchedIdle: errors.Is(err, ErrNoSchedIdle)})
		return err
	}
	if err := enc.Encode(Hello{Threads: threads}); err != nil {
		return err
	}
	h := newHog()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		h.pause() // ends the jobs in progress; idle workers see ctx at their gate
		wg.Wait()
	}()
	for range *c {
		wg.Go(func() { h.work(ctx, jobs) })
	}
	return h.converse(ctx, stdin, enc, started)
}

// converse answers each command line of in with a Count, until in ends
// (nil) or ctx does.
func (h *hog) converse(ctx context.Context, in io.Reader, enc *json.Encoder, started time.Time) error {
	// The input is read on a goroutine of its own, so that a signal ends
	// the command while it waits for a line (a Scan does not see ctx). That
	// goroutine ends with the input; the process exits before then.
	lines := make(chan string)
	scanErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				scanErr <- ctx.Err()
				return
			}
		}
		scanErr <- sc.Err()
		close(lines)
	}()
	for {
		var line string
		select {
		case <-ctx.Done():
			return ctx.Err()
		case l, ok := <-lines:
			if !ok {
				return <-scanErr
			}
			line = l
		}
		var reply Count
		switch cmd := strings.TrimSpace(line); cmd {
		case cmdRun:
			h.run()
		case cmdPause:
			h.pause()
		case cmdCount:
		default:
			reply.Error = fmt.Sprintf("unknown command %q (valid: %s, %s, %s)", cmd, cmdRun, cmdPause, cmdCount)
		}
		reply.Passes, reply.UptimeS, reply.Running = h.passes.Load(), time.Since(started).Seconds(), h.running.Load()
		if err := enc.Encode(reply); err != nil {
			return err
		}
	}
}

// hog is the work: goroutines that run CRC32 passes over the demo's buffer
// while the gate is open.
type hog struct {
	buf     []byte
	passes  atomic.Int64
	running atomic.Bool // read after every pass
	mu      sync.Mutex
	gate    chan struct{} // closed while running
	sink    atomic.Uint32 // the last CRC, so that no pass is dead code
}

// newHog returns a paused hog over a buffer the size of the demo's.
func newHog() *hog {
	h := &hog{buf: make([]byte, demo.BufferSize), gate: make(chan struct{})}
	rand.NewChaCha8([32]byte{}).Read(h.buf) // the demo's contents, as it seeds them
	return h
}

// run opens the gate.
func (h *hog) run() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.running.Load() {
		h.running.Store(true)
		close(h.gate)
	}
}

// pause closes the gate: each goroutine stops after its current pass.
func (h *hog) pause() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running.Load() {
		h.running.Store(false)
		h.gate = make(chan struct{})
	}
}

// currentGate returns the gate to wait at.
func (h *hog) currentGate() chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gate
}

// work runs jobs (by default of the demo's default size: a random count
// of passes in demo.DefaultMinPasses..DefaultMaxPasses, as a /checksum
// request without n) one after the other while the gate is open, resting
// after each as jobs says, until ctx ends. A job cut short by a pause is
// not resumed: the next one is drawn afresh.
func (h *hog) work(ctx context.Context, jobs Jobs) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.currentGate():
		}
		if ctx.Err() != nil {
			return
		}
		n := jobs.next()
		var crc uint32
		for i := 0; i < n && h.running.Load(); i++ {
			crc = crc32.Update(crc, crc32.IEEETable, h.buf)
			h.passes.Add(1)
		}
		h.sink.Store(crc)
		jobs.rest(ctx)
	}
}
