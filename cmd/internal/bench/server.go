package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/childproc"
	"github.com/cpusched/cpusched/cmd/internal/demo"
)

// Child process timing: how long a server may take to print its address and
// answer /stats, and how long it gets to exit after SIGTERM before SIGKILL.
// Tests shorten them.
var (
	startTimeout = 10 * time.Second
	stopGrace    = 3 * time.Second
)

// maxStderr bounds the child's stderr kept for error messages.
const maxStderr = 16 << 10

// child is a process started in its own process group, stopped with
// SIGTERM to the group and SIGKILL after stopGrace.
type child struct {
	cmd      *exec.Cmd
	stdout   io.ReadCloser
	stderr   *tailBuffer
	log      *logWatch     // the turns to contended that stderr logged
	exited   chan struct{} // closed when Wait has returned
	waitErr  error         // set before exited closes
	stopOnce sync.Once
	stopErr  error
}

// startChild starts name with args in a new process group, with stdout as a
// pipe and stderr kept (its last maxStderr bytes) for error messages. On
// Linux the child also gets SIGKILL if this process dies first.
func startChild(name string, args ...string) (*child, error) {
	return startCmd(exec.Command(name, args...))
}

// startCmd is startChild for a command built by the caller.
func startCmd(cmd *exec.Cmd) (*child, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	childproc.DieWithParent(cmd)
	c := &child{cmd: cmd, stderr: &tailBuffer{max: maxStderr}, log: &logWatch{}, exited: make(chan struct{})}
	cmd.Stderr = io.MultiWriter(c.stderr, c.log)
	var err error
	if c.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// stop ends the child's process group: SIGTERM, then SIGKILL if the child
// has not exited within stopGrace (the group is killed in any case, so that
// grandchildren do not outlive it). It returns once the child has been
// reaped, with an error if it had to be killed or exited with an error other
// than the SIGTERM. stop is idempotent; later calls return the first result.
func (c *child) stop() error {
	c.stopOnce.Do(func() {
		pgid := c.cmd.Process.Pid
		select {
		case <-c.exited:
		default:
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			t := time.NewTimer(stopGrace)
			select {
			case <-c.exited:
			case <-t.C:
				c.stopErr = fmt.Errorf("did not exit within %v of SIGTERM; killed", stopGrace)
			}
			t.Stop()
		}
		// Whatever is left of the group (the child if it ignored SIGTERM,
		// or processes it started) goes now.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-c.exited
		if c.stopErr == nil && c.waitErr != nil && !terminatedBy(c.waitErr, syscall.SIGTERM) {
			c.stopErr = fmt.Errorf("exit: %v%s", c.waitErr, c.stderrTail())
		}
	})
	return c.stopErr
}

// terminatedBy reports whether err is the exit of a process killed by sig.
func terminatedBy(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// stderrTail returns the child's stderr so far as "; stderr: ..." or "".
func (c *child) stderrTail() string {
	s := strings.TrimSpace(c.stderr.String())
	if s == "" {
		return ""
	}
	return "; its stderr:\n" + s
}

// tailBuffer is a concurrency-safe writer that keeps the last max bytes.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// server is a running demo server.
type server struct {
	*child
	url    string // http://127.0.0.1:PORT
	banner string // what the server said about itself: "isolation=none workers=2 gomaxprocs=2"
}

// startServer runs name with args where place says (its cgroup, CPUs and
// environment; childPlace{}: as bench runs), reads its "listening on URL"
// line and waits until GET URL/stats answers 200, within startTimeout. On
// failure the process is stopped and the error includes its stderr.
func startServer(ctx context.Context, place childPlace, name string, args []string) (*server, error) {
	var c *child
	err := place.start(func() (err error) {
		c, err = startCmd(place.command(name, args))
		return err
	})
	if err != nil {
		if c != nil {
			_ = c.stop()
		}
		return nil, fmt.Errorf("starting the server %s: %w", name, err)
	}
	s := &server{child: c}
	if err := s.waitReady(ctx); err != nil {
		_ = c.stop()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("server %s %s: %w%s", name, strings.Join(args, " "), err, c.stderrTail())
	}
	return s, nil
}

// waitReady finds the server's URL on its stdout (then keeps draining
// stdout so the server never blocks writing it) and polls /stats until it
// answers 200.
func (s *server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	found := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(s.stdout)
		sent := false
		for sc.Scan() {
			if sent {
				continue
			}
			if url, banner, ok := parseListening(sc.Text()); ok {
				found <- [2]string{url, banner}
				sent = true
			}
		}
		// Drain anything past an over-long line until the pipe closes.
		_, _ = io.Copy(io.Discard, s.stdout)
	}()
	select {
	case f := <-found:
		s.url, s.banner = f[0], f[1]
	case <-s.exited:
		return fmt.Errorf("exited before it printed its address: %v", s.waitErr)
	case <-ctx.Done():
		return fmt.Errorf("did not print \"listening on http://...\" within %v", startTimeout)
	}
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	var lastErr error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+pathStats, nil)
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		lastErr = err
		select {
		case <-s.exited:
			return fmt.Errorf("exited before answering %s: %v", pathStats, s.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer 200 within %v (last: %v)", s.url+pathStats, startTimeout, lastErr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// parseListening parses the server's start-up line,
// "cpusched serve: listening on http://127.0.0.1:PORT (isolation=none ...)",
// into the URL and the text in parentheses.
func parseListening(line string) (url, banner string, ok bool) {
	_, rest, found := strings.Cut(line, "listening on ")
	if !found {
		return "", "", false
	}
	url, rest, _ = strings.Cut(strings.TrimSpace(rest), " ")
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return "", "", false
	}
	rest = strings.TrimSpace(rest)
	rest = strings.TrimSuffix(strings.TrimPrefix(rest, "("), ")")
	return strings.TrimRight(url, "/"), rest, true
}

// serverStats is the part of the demo server's /stats that the benchmark
// reads.
type serverStats struct {
	Uptime float64 `json:"uptime_s"`
	Passes int64   `json:"passes"`
	// PassesByGroup are the passes of each group of serve -groups.
	PassesByGroup map[string]uint64 `json:"passes_by_group"`
	// AutoRoutes are httpsched.Auto's routes, from a server with -auto.
	AutoRoutes []demo.AutoRoute `json:"auto_routes"`
	Scheduler  struct {
		Isolation       string  `json:"isolation"`
		Lends           uint64  `json:"lends"`
		LentTimeMS      float64 `json:"lent_time_ms"`
		ContendedTimeMS float64 `json:"contended_time_ms"`
		ThreadsRaisable bool    `json:"threads_raisable"`
		RetiredThreads  uint64  `json:"retired_threads"`
		LooseThreads    uint64  `json:"loose_threads"`
		// Groups are the tracked groups' figures (demo.GroupStats).
		Groups map[string]demo.GroupStats `json:"groups"`
	} `json:"scheduler"`
	GC struct {
		Total    demo.Histogram `json:"pauses_total"`
		Stopping demo.Histogram `json:"pauses_stopping"`
	} `json:"gc"`
}

// fetchStats reads and decodes base/stats.
func fetchStats(ctx context.Context, client *http.Client, base string) (serverStats, error) {
	var st serverStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+pathStats, nil)
	if err != nil {
		return st, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return st, fmt.Errorf("reading the server's %s: %w", pathStats, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return st, fmt.Errorf("reading the server's %s: %w", pathStats, err)
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("the server's %s: %s: %s", pathStats, resp.Status, bytes.TrimSpace(body))
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("decoding the server's %s: %w", pathStats, err)
	}
	return st, nil
}

// lending is what an ospriority server's scheduler lent between two
// /stats reads: the lends, and the slots lent on average (its lent slot
// time over the server's own time between the reads); nil for the other
// modes.
func lending(before, after serverStats) (lends *uint64, slots *float64) {
	b, a := before.Scheduler, after.Scheduler
	sec := after.Uptime - before.Uptime
	if a.Isolation != "ospriority" || a.Lends < b.Lends || sec <= 0 {
		return nil, nil
	}
	n := a.Lends - b.Lends
	avg := max(a.LentTimeMS-b.LentTimeMS, 0) / 1e3 / sec
	return &n, &avg
}

// contention is the share of the time between two /stats reads that an
// ospriority server's scheduler ran its task threads at normal priority
// because other processes kept the CPUs busy (Stats.ContendedTime), in
// percent; nil for the other modes.
func contention(before, after serverStats) *float64 {
	b, a := before.Scheduler, after.Scheduler
	sec := after.Uptime - before.Uptime
	if a.Isolation != "ospriority" || sec <= 0 {
		return nil
	}
	pct := min(max(a.ContendedTimeMS-b.ContendedTimeMS, 0)/1e3/sec*100, 100)
	return &pct
}

// retirement is what an ospriority server's scheduler said of its lowered
// threads over the time between two /stats reads: whether it can raise
// one back (Stats.ThreadsRaisable, at the later read), how many it ended
// instead (Stats.RetiredThreads) and how many went back to the runtime's
// pool lowered (Stats.LooseThreads); nil for the other modes.
func retirement(before, after serverStats) (raisable *bool, retired, loose *uint64) {
	b, a := before.Scheduler, after.Scheduler
	if a.Isolation != "ospriority" {
		return nil, nil, nil
	}
	r := a.ThreadsRaisable
	n, l := a.RetiredThreads-min(b.RetiredThreads, a.RetiredThreads), a.LooseThreads-min(b.LooseThreads, a.LooseThreads)
	return &r, &n, &l
}
