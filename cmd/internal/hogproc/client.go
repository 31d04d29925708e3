// The parent's side of the conversation: starting the child, its commands
// and stopping it.

package hogproc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Timing of the child: how long its Hello and each answer may take (a
// SCHED_IDLE process on a machine whose CPUs are all busy runs only in the
// kernel's small share for idle threads), and how long it gets to exit
// once its stdin is closed. Tests shorten them.
var (
	helloTimeout = 10 * time.Second
	replyTimeout = 30 * time.Second
	stopGrace    = 3 * time.Second
)

// Process is a running hog, seen from its parent. Its methods are safe for
// concurrent use; the commands are answered one at a time.
type Process struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stderr   bytes.Buffer  // read only after exited is closed
	lines    chan []byte   // the child's stdout, a line at a time
	stopping chan struct{} // closed by Stop: nobody reads lines any more
	exited   chan struct{} // closed once the child has been reaped
	waitErr  error         // set before exited is closed
	threads  int

	mu       sync.Mutex // one command at a time
	broken   error      // an answer that never came: the conversation is lost
	stopOnce sync.Once
	stopErr  error
}

// Start starts cmd, a `cpusched idle-hog -c N` built by the caller (with
// DieWithParent, perhaps wrapped to join a cgroup; its Stdin, Stdout and
// Stderr unset), and waits for its Hello. If the child could not make its
// threads SCHED_IDLE the error wraps ErrNoSchedIdle and says why; on any
// failure the child has been stopped.
func Start(ctx context.Context, cmd *exec.Cmd) (*Process, error) {
	p := &Process{cmd: cmd, lines: make(chan []byte, 1), stopping: make(chan struct{}), exited: make(chan struct{})}
	cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the hog process: %w", err)
	}
	go p.read(stdout)
	var hello Hello
	if err := p.receive(ctx, helloTimeout, &hello); err != nil {
		_ = p.Stop()
		return nil, fmt.Errorf("the hog process's first line: %w%s", err, p.stderrTail())
	}
	if hello.Error != "" {
		_ = p.Stop()
		if hello.NoSchedIdle {
			return nil, fmt.Errorf("%w%s", ErrNoSchedIdle, strings.TrimPrefix(hello.Error, ErrNoSchedIdle.Error()))
		}
		return nil, fmt.Errorf("the hog process: %s", hello.Error)
	}
	p.threads = hello.Threads
	return p, nil
}

// read hands the child's stdout to receive a line at a time, then reaps
// the child (Wait may only come once the pipe has been read to its end).
func (p *Process) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := bytes.Clone(sc.Bytes())
		select {
		case p.lines <- line:
		case <-p.stopping:
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	p.waitErr = p.cmd.Wait()
	close(p.exited)
}

// receive decodes the child's next line into v, within timeout.
func (p *Process) receive(ctx context.Context, timeout time.Duration, v any) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line := <-p.lines:
		return json.Unmarshal(line, v)
	case <-p.exited:
		select {
		case line := <-p.lines: // its last words, sent before it exited
			return json.Unmarshal(line, v)
		default:
		}
		return fmt.Errorf("the hog process exited (%v)", p.waitErr)
	case <-t.C:
		return fmt.Errorf("no answer from the hog process within %v", timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Threads is how many threads the child lowered before it said hello.
func (p *Process) Threads() int { return p.threads }

// PID is the child's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Run starts the passes (or lets them go on) and returns the count then.
func (p *Process) Run(ctx context.Context) (Count, error) { return p.ask(ctx, cmdRun) }

// Pause stops the passes after the one each goroutine is in.
func (p *Process) Pause(ctx context.Context) (Count, error) { return p.ask(ctx, cmdPause) }

// Count returns the passes so far without changing anything.
func (p *Process) Count(ctx context.Context) (Count, error) { return p.ask(ctx, cmdCount) }

// ask sends command and returns its answer. An answer that does not come
// leaves the conversation out of step, so every later command fails too.
func (p *Process) ask(ctx context.Context, command string) (Count, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var c Count
	if p.broken != nil {
		return c, p.broken
	}
	if _, err := io.WriteString(p.stdin, command+"\n"); err != nil {
		p.broken = fmt.Errorf("the hog process: %s: %w", command, err)
		return c, p.broken
	}
	if err := p.receive(ctx, replyTimeout, &c); err != nil {
		p.broken = fmt.Errorf("the hog process: %s: %w", command, err)
		return c, p.broken
	}
	if c.Error != "" {
		return c, fmt.Errorf("the hog process: %s", c.Error)
	}
	return c, nil
}

// Stop closes the child's stdin, which ends it, and kills it if it has not
// exited within stopGrace. It returns once the child has been reaped, with
// an error if it failed. A kill is not an error: every count the parent
// wanted was answered before Stop, and a SCHED_IDLE process on a machine
// whose CPUs others keep busy may not run to its exit for seconds (a CI
// run's bench tests, beside other packages' tests under -race, failed on
// a 3 s grace). It is idempotent.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		close(p.stopping)
		_ = p.stdin.Close()
		t := time.NewTimer(stopGrace)
		defer t.Stop()
		select {
		case <-p.exited:
		case <-t.C:
			_ = p.cmd.Process.Kill()
			<-p.exited
			return
		}
		if p.waitErr != nil {
			p.stopErr = fmt.Errorf("the hog process: %v%s", p.waitErr, p.stderrTail())
		}
	})
	return p.stopErr
}

// stderrTail returns the child's stderr as "; its stderr: ..." once it has
// exited, or "".
func (p *Process) stderrTail() string {
	select {
	case <-p.exited:
	default:
		return ""
	}
	s := strings.TrimSpace(p.stderr.String())
	if s == "" {
		return ""
	}
	const max = 2 << 10
	if len(s) > max {
		s = "..." + s[len(s)-max:]
	}
	return "; its stderr: " + s
}
