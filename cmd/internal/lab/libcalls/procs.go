// The experiment's server processes and the meter that loads and probes
// them.

package libcalls

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/childproc"
	"github.com/cpusched/cpusched/cmd/internal/hogproc"
	"github.com/cpusched/cpusched/cmd/internal/load"
)

// serverKind is which of the servers a process is.
type serverKind int

const (
	plainServer serverKind = iota // the server: direct and scheduled routes
	autoServer                    // the auto step's: its mux under httpsched.Auto
	floorServer                   // the floor's: SCHED_IDLE, no Scheduler
)

// serverProc is a running server process.
type serverProc struct {
	what    string // "the server", "the auto server" or "the floor's server", for errors
	cmd     *exec.Cmd
	hello   Hello
	base    string // http://ADDR
	exited  chan struct{}
	waitErr error // set before exited is closed
	stderr  childproc.Tail
	cancel  context.CancelFunc
}

// startServer starts a server of kind as l says and waits for its Hello.
// The floor's server that cannot make its threads SCHED_IDLE gives an
// error wrapping hogproc.ErrNoSchedIdle. On failure the process has been
// stopped.
func startServer(ctx context.Context, cfg Config, l *launcher, kind serverKind) (*serverProc, error) {
	sctx, cancel := context.WithCancel(ctx)
	args := []string{"serve", "-addr", "127.0.0.1:0", "-cost", strconv.Itoa(cfg.Cost)}
	what := "the server"
	switch kind {
	case autoServer:
		args, what = append(args, "-auto"), "the auto server"
	case floorServer:
		args, what = append(args, "-floor"), "the floor's server"
	}
	cmd := cfg.Command(sctx, args...)
	p := &serverProc{what: what, cmd: cmd, exited: make(chan struct{}), cancel: cancel}
	if err := l.wrap(cmd); err != nil {
		cancel()
		return nil, err
	}
	cmd.Stderr = &p.stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	lines := make(chan []byte, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- bytes.Clone(sc.Bytes())
		}
		_, _ = io.Copy(io.Discard, stdout) // nothing more is expected; Wait needs the pipe read
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	fail := func(err error) (*serverProc, error) {
		p.stop()
		return nil, err
	}
	var line []byte
	select {
	case line = <-lines:
	case <-p.exited:
		select {
		case line = <-lines: // its last words (a Hello with an error), sent before it exited
		default:
			return fail(fmt.Errorf("it exited before its first line: %s", p.exitError()))
		}
	case <-time.After(helloTimeout):
		return fail(fmt.Errorf("no first line within %v: %s", helloTimeout, p.stderr.String()))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	if err := json.Unmarshal(line, &p.hello); err != nil {
		return fail(fmt.Errorf("its first line %q: %w", line, err))
	}
	switch {
	case p.hello.NoSchedIdle:
		return fail(fmt.Errorf("%w: %s", hogproc.ErrNoSchedIdle, p.hello.Error))
	case p.hello.Error != "" || p.hello.Addr == "":
		return fail(fmt.Errorf("it could not serve: %s", p.hello.Error))
	}
	if err := l.check(cmd.Process.Pid, p.what); err != nil {
		return fail(err)
	}
	p.base = "http://" + p.hello.Addr
	return p, nil
}

// stop ends the process (SIGTERM, then SIGKILL after WaitDelay) and waits
// for it. It is idempotent.
func (p *serverProc) stop() {
	p.cancel()
	<-p.exited
}

// annotate adds to err, if the process has exited, how it exited: the
// likely cause of a step's failure.
func (p *serverProc) annotate(err error) error {
	select {
	case <-p.exited:
		return fmt.Errorf("%w (%s exited: %s)", err, p.what, p.exitError())
	default:
		return err
	}
}

// exitError describes how the process exited, with its stderr; call it
// only after exited is closed.
func (p *serverProc) exitError() string {
	s := "status 0"
	if p.waitErr != nil {
		s = p.waitErr.Error()
	}
	if tail := p.stderr.String(); tail != "" {
		s += ": " + tail
	}
	return s
}

// meter runs the steps of one run against its server.
type meter struct {
	cfg         Config
	srv         *serverProc
	probe       *http.Client
	heavy       []*http.Client // one per kind of cfg.Kinds
	statsClient *http.Client
}

func newMeter(cfg Config, srv *serverProc) *meter {
	m := &meter{cfg: cfg, srv: srv, probe: newClient(probeConcurrency(cfg.Rate)), statsClient: &http.Client{Timeout: statsTimeout}}
	for range cfg.Kinds {
		m.heavy = append(m.heavy, newClient(cfg.Clients))
	}
	return m
}

// close closes the clients' idle connections.
func (m *meter) close() {
	for _, c := range append([]*http.Client{m.probe, m.statsClient}, m.heavy...) {
		c.CloseIdleConnections()
	}
}

// newClient returns a keep-alive client for conns connections to
// loopback, kept for the whole run so that the warm-up's connections serve
// the windows.
func newClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: nil, MaxIdleConns: conns, MaxIdleConnsPerHost: conns,
		IdleConnTimeout: 90 * time.Second, DisableCompression: true,
	}}
}

// probeConcurrency is the probe's cap on requests in flight: a quarter of
// a second's requests, at least 8, as the bench's, so that a stalled
// server meets requests rather than a full queue (each is timed from when
// it was due either way).
func probeConcurrency(rate float64) int {
	return min(max(8, int(math.Ceil(rate/4))), load.MaxConcurrency)
}

// probeConfig returns the probe's load for d: open loop at cfg.Rate on the
// server's light route, every request due in d counted however late.
func (m *meter) probeConfig(d time.Duration) load.Config {
	return load.Config{URL: m.srv.base + pathFast, Concurrency: probeConcurrency(m.cfg.Rate), Rate: m.cfg.Rate,
		Duration: d, Drain: true, Client: m.probe}
}

// warm sends calls requests, one at a time, to each heavy route of the
// run's kinds under each of prefixes, so that the first window does not
// pay for the first connections and calls.
func (m *meter) warm(ctx context.Context, calls int, prefixes ...string) error {
	for i, kind := range m.cfg.Kinds {
		for _, prefix := range prefixes {
			res, err := load.Run(ctx, load.Config{URL: m.srv.base + prefix + kind, Concurrency: 1, Requests: calls, Timeout: heavyTimeout, Client: m.heavy[i]})
			if err != nil {
				return err
			}
			if res.Completed != int64(calls) || res.Non2xx != 0 {
				return fmt.Errorf("warm-up: %s%s did not answer 200 (status codes %v, failures %v)", prefix, kind, res.StatusCodes, res.Failed)
			}
		}
	}
	return nil
}

// step measures one step: the heavy clients on target's routes under
// prefix ("" for none) and the probe on the server, for the warm-up, then
// the window with the target's counts at both ends; then it stops the
// clients and waits for target to go quiet.
func (m *meter) step(ctx context.Context, step string, target *serverProc, prefix string, phase func(string)) (StepResult, error) {
	res := StepResult{Step: step}
	heavyCtx, stopHeavy := context.WithCancel(ctx)
	heavy := make([]*load.Result, len(m.cfg.Kinds))
	var wg sync.WaitGroup
	defer func() { stopHeavy(); wg.Wait() }()
	if prefix != "" {
		for i, kind := range m.cfg.Kinds {
			wg.Go(func() {
				heavy[i], _ = load.Run(heavyCtx, load.Config{URL: target.base + prefix + kind, Concurrency: m.cfg.Clients,
					Duration: 24 * time.Hour, Timeout: heavyTimeout, Client: m.heavy[i]})
			})
		}
	}
	if m.cfg.Warmup > 0 {
		phase("warm-up")
		if _, err := load.Run(ctx, m.probeConfig(m.cfg.Warmup)); err != nil {
			return res, err
		}
	}
	phase("measuring")
	before, err := m.count(ctx, target)
	if err != nil {
		return res, err
	}
	probe, err := load.Run(ctx, m.probeConfig(m.cfg.Window))
	if err != nil {
		return res, err
	}
	after, err := m.count(ctx, target)
	if err != nil {
		return res, err
	}
	res.Probe = probe.Summary()
	if prefix == "" {
		return res, nil
	}
	phase("settling")
	stopHeavy()
	wg.Wait()
	settled, err := m.settle(ctx, target)
	if err != nil {
		return res, err
	}
	var calls Calls
	url := fmt.Sprintf("%s%s?from=%g&to=%g", target.base, pathCalls, before.UptimeS, after.UptimeS)
	if err := m.get(ctx, url, &calls); err != nil {
		return res, err
	}
	sec := after.UptimeS - before.UptimeS
	for i, kind := range m.cfg.Kinds {
		k := KindResult{Kind: kind, Calls: calls.Credit[kind], Completed: after.Completed[kind] - before.Completed[kind]}
		k.OpsPerS = k.Calls / sec
		if h := heavy[i]; h != nil {
			k.Failed = h.FailedTotal() + h.Non2xx
		}
		res.Heavy = append(res.Heavy, k)
	}
	if step == StepSched || step == StepAuto {
		res.ContendedS = after.ContendedS - before.ContendedS
	}
	res.Routes = settled.Routes
	return res, nil
}

// count reads target's counters.
func (m *meter) count(ctx context.Context, target *serverProc) (Count, error) {
	var c Count
	err := m.get(ctx, target.base+pathStats, &c)
	return c, err
}

// get decodes the JSON answer of url into v.
func (m *meter) get(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := m.statsClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// settle waits until target has no heavy request left (the direct calls
// run to their end after their clients have gone) and returns its counts
// then.
func (m *meter) settle(ctx context.Context, target *serverProc) (Count, error) {
	deadline := time.Now().Add(settleLimit)
	for {
		c, err := m.count(ctx, target)
		if err != nil {
			return c, err
		}
		if c.InFlight == 0 {
			return c, nil
		}
		if time.Now().After(deadline) {
			return c, fmt.Errorf("%d heavy requests still in the server %v after their clients stopped", c.InFlight, settleLimit)
		}
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
