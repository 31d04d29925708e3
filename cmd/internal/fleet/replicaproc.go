package fleet

// The replicas as Run sees them: child processes, each perhaps in a cgroup
// of its own (with a neighbour in it, in the neighbor scenario), and the
// line protocol of replica.go.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/bench"
	"github.com/cpusched/cpusched/cmd/internal/childproc"
	"github.com/cpusched/cpusched/cmd/internal/hogproc"
)

// Child process timing: how long a replica may take to say hello or to
// answer a stats request, and to exit once its stdin is closed.
const (
	helloTimeout = 10 * time.Second
	statsTimeout = 5 * time.Second
	exitTimeout  = 5 * time.Second
)

// replicaProc is a running replica.
type replicaProc struct {
	spec     replicaSpec
	hello    hello
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	lines    chan lineOrErr   // the replica's stdout, a line each
	quit     chan struct{}    // closed by stop: nobody reads lines any more
	stderr   bytes.Buffer     // read only once exited is closed; a replica is quiet but for what went wrong
	quota    *bench.CPUQuota  // nil: none
	neighbor *hogproc.Process // the neighbour in its cgroup; nil: none
	exited   chan struct{}    // closed when Wait has returned
	err      error            // Wait's, set before exited closes
	once     sync.Once
	stopErr  error
}

type lineOrErr struct {
	line []byte
	err  error
}

// startReplica starts a replica of spec, in a new cgroup of quotas
// (limited to spec.cpuLimit, or unlimited) unless quotas is nil, and waits
// for its hello. On failure nothing is left running or made.
func startReplica(ctx context.Context, program string, quotas *bench.CPUQuotas, spec replicaSpec) (*replicaProc, error) {
	name, args := program, []string{ReplicaCommand, "-reports", spec.reports}
	if spec.batch {
		args = append(args, "-batch")
	}
	r := &replicaProc{spec: spec, exited: make(chan struct{}),
		lines: make(chan lineOrErr), quit: make(chan struct{})}
	if spec.cpuLimit > 0 && quotas == nil {
		return nil, errors.New("a CPU limit without cgroups")
	}
	if quotas != nil {
		var err error
		if spec.cpuLimit > 0 {
			r.quota, err = quotas.New(spec.cpuLimit)
		} else {
			r.quota, err = quotas.NewUnlimited()
		}
		if err != nil {
			return nil, err
		}
		name, args = r.quota.Wrap(name, args)
	}
	r.cmd = exec.Command(name, args...)
	childproc.DieWithParent(r.cmd)
	r.cmd.Env = os.Environ()
	if spec.gomaxprocs > 0 {
		r.cmd.Env = append(r.cmd.Env, "GOMAXPROCS="+strconv.Itoa(spec.gomaxprocs))
	}
	r.cmd.Stderr = &r.stderr
	stdout, err := r.cmd.StdoutPipe()
	if err == nil {
		r.stdin, err = r.cmd.StdinPipe()
	}
	if err == nil {
		err = r.cmd.Start()
	}
	if err != nil {
		r.removeQuota()
		return nil, fmt.Errorf("starting a replica: %w", err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.exited)
	}()
	go r.read(stdout)
	if err := r.waitHello(ctx); err != nil {
		_ = r.stop()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("replica %s: %w%s", strings.Join(args, " "), err, r.stderrText())
	}
	if spec.neighbor {
		if r.neighbor, err = startNeighbor(ctx, program, r.quota, spec.cpuLimit); err != nil {
			_ = r.stop()
			return nil, err
		}
	}
	return r, nil
}

// startNeighbor starts a replica's neighbour in its cgroup, quota (of cpus
// CPUs), and sets it computing: `program neighbor -c N` with GOMAXPROCS N,
// N the limit rounded up, so that it keeps one thread busy per CPU of the
// limit at normal priority, as another service sharing the container's
// CPU would. On failure nothing is left running.
func startNeighbor(ctx context.Context, program string, quota *bench.CPUQuota, cpus float64) (*hogproc.Process, error) {
	if quota == nil {
		return nil, errors.New("a neighbour without a cgroup to share")
	}
	n := strconv.Itoa(int(math.Ceil(cpus)))
	name, args := quota.Wrap(program, []string{hogproc.NeighborCommand, "-c", n})
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+n)
	childproc.DieWithParent(cmd)
	p, err := hogproc.Start(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("starting the neighbour: %w", err)
	}
	if _, err := p.Run(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("starting the neighbour's work: %w", err), p.Stop())
	}
	return p, nil
}

// read passes the replica's stdout on, a line at a time, until it ends.
func (r *replicaProc) read(stdout io.Reader) {
	defer close(r.lines)
	br := bufio.NewReader(stdout)
	for {
		line, err := br.ReadBytes('\n')
		l := lineOrErr{line: line}
		if err != nil {
			l = lineOrErr{err: fmt.Errorf("reading its stdout: %w", err)}
		}
		select {
		case r.lines <- l:
		case <-r.quit:
			_, _ = io.Copy(io.Discard, br) // until the pipe closes at its exit
			return
		}
		if err != nil {
			return
		}
	}
}

// next returns the replica's next line of stdout, within timeout.
func (r *replicaProc) next(ctx context.Context, timeout time.Duration, v any) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case l, ok := <-r.lines:
		if !ok {
			return errors.New("its stdout has ended")
		}
		if l.err != nil {
			return l.err
		}
		return childproc.DecodeLast(l.line, v)
	case <-t.C:
		return fmt.Errorf("no answer within %v", timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitHello reads the hello and checks that the replica listens on
// loopback, the only place the load may go.
func (r *replicaProc) waitHello(ctx context.Context) error {
	if err := r.next(ctx, helloTimeout, &r.hello); err != nil {
		return fmt.Errorf("no hello: %w", err)
	}
	host, _, err := net.SplitHostPort(r.hello.Addr)
	if err != nil {
		return fmt.Errorf("its address %q: %w", r.hello.Addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("it listens on %s, not on a loopback address", r.hello.Addr)
	}
	return nil
}

// stats asks the replica for its counters.
func (r *replicaProc) stats(ctx context.Context) (replicaStats, error) {
	var st replicaStats
	if _, err := io.WriteString(r.stdin, statsRequest+"\n"); err != nil {
		return st, fmt.Errorf("replica %s: asking for its stats: %w%s", r.hello.Addr, err, r.stderrText())
	}
	if err := r.next(ctx, statsTimeout, &st); err != nil {
		return st, fmt.Errorf("replica %s: reading its stats: %w%s", r.hello.Addr, err, r.stderrText())
	}
	return st, nil
}

// stop closes the replica's stdin, which ends it, kills it if it has not
// exited within exitTimeout, stops its neighbour and removes its cgroup. It returns an error if
// the replica had to be killed or failed; it is idempotent.
func (r *replicaProc) stop() error {
	r.once.Do(func() {
		close(r.quit)
		_ = r.stdin.Close()
		t := time.NewTimer(exitTimeout)
		select {
		case <-r.exited:
			if r.err != nil {
				r.stopErr = fmt.Errorf("replica %s: %v%s", r.hello.Addr, r.err, r.stderrText())
			}
		case <-t.C:
			_ = r.cmd.Process.Kill()
			<-r.exited
			r.stopErr = fmt.Errorf("replica %s did not exit within %v of its stdin's end; killed%s", r.hello.Addr, exitTimeout, r.stderrText())
		}
		t.Stop()
		if r.neighbor != nil {
			if err := r.neighbor.Stop(); err != nil && r.stopErr == nil {
				r.stopErr = err
			}
		}
		if err := r.removeQuota(); err != nil && r.stopErr == nil {
			r.stopErr = err
		}
	})
	return r.stopErr
}

// removeQuota removes the replica's cgroup, if it has one.
func (r *replicaProc) removeQuota() error {
	if r.quota == nil {
		return nil
	}
	return r.quota.Remove()
}

// stderrText returns the replica's stderr as "; its stderr: ..." once it
// has exited, "" before or if it wrote nothing.
func (r *replicaProc) stderrText() string {
	select {
	case <-r.exited:
	default:
		return ""
	}
	s := strings.TrimSpace(r.stderr.String())
	if s == "" {
		return ""
	}
	return "; its stderr:\n" + s
}

// stopAll stops the replicas, all of them whatever fails, and returns the
// errors joined.
func stopAll(procs []*replicaProc) error {
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.stop() })
	}
	wg.Wait()
	return errors.Join(errs...)
}
