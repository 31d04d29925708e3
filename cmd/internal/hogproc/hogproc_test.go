package hogproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cpusched/cpusched/cmd/internal/childproc"
)

// childEnv makes the test binary the hog child: "ok" runs Main, "deny"
// runs it with every sched_setattr refused, as a sandbox would,
// "neighbor" runs NeighborMain.
const childEnv = "IDLEHOG_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "ok":
		exitWith(Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	case "neighbor":
		exitWith(NeighborMain(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	case "deny":
		deny := func() (int, error) {
			return lowerThreads(func() ([]int, error) { return []int{os.Getpid()}, nil },
				func(int) error { return syscall.EPERM })
		}
		exitWith(serve(context.Background(), Command, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, deny))
	case "deaf":
		// Says hello, then never reads its stdin: a child that does not
		// exit when asked.
		fmt.Println(`{"threads":1}`)
		time.Sleep(time.Hour)
	}
	// A SCHED_IDLE child may take longer than stopGrace to run to its exit
	// while other processes keep the CPUs busy (see replyTimeout): waiting
	// out its exit, the tests see its own errors rather than a kill.
	stopGrace = replyTimeout
	goleak.VerifyTestMain(m)
}

func exitWith(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// startChild starts the test binary as the hog child (env "ok" or "deny")
// with args, and stops it at the end of the test.
func startChild(t *testing.T, env string, args ...string) (*Process, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"="+env)
	childproc.DieWithParent(cmd)
	p, err := Start(context.Background(), cmd)
	if err == nil {
		t.Cleanup(func() {
			if err := p.Stop(); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
	}
	return p, err
}

func TestLowerThreadsListsUntilNoneIsNew(t *testing.T) {
	listings := [][]int{{1, 2}, {1, 2, 3}, {2, 3}}
	var set []int
	n, err := lowerThreads(func() ([]int, error) {
		l := listings[0]
		if len(listings) > 1 {
			listings = listings[1:]
		}
		return l, nil
	}, func(tid int) error {
		set = append(set, tid)
		if tid == 2 {
			return syscall.ESRCH // exited before it was reached
		}
		return nil
	})
	if err != nil || n != 2 || !slices.Equal(set, []int{1, 2, 3}) {
		t.Errorf("got %d lowered (error %v), set called on %v; want 2 (thread 2 had exited), each thread once: [1 2 3]", n, err, set)
	}
}

func TestLowerThreadsRefused(t *testing.T) {
	_, err := lowerThreads(func() ([]int, error) { return []int{7}, nil }, func(int) error { return syscall.EPERM })
	if !errors.Is(err, ErrNoSchedIdle) || !strings.Contains(err.Error(), "thread 7: sched_setattr(SCHED_IDLE): operation not permitted") {
		t.Errorf("got %v, want ErrNoSchedIdle naming thread 7 and EPERM", err)
	}
	_, err = lowerThreads(func() ([]int, error) { return nil, os.ErrNotExist }, nil)
	if !errors.Is(err, ErrNoSchedIdle) || !strings.Contains(err.Error(), "listing the threads") {
		t.Errorf("got %v, want ErrNoSchedIdle: listing the threads", err)
	}
}

// TestChildWithoutSchedIdle: a child that cannot lower its threads says
// why in its Hello, and Start returns ErrNoSchedIdle with the reason.
func TestChildWithoutSchedIdle(t *testing.T) {
	_, err := startChild(t, "deny", "-c", "2")
	if !errors.Is(err, ErrNoSchedIdle) || !strings.Contains(err.Error(), "operation not permitted") {
		t.Fatalf("got %v, want ErrNoSchedIdle with the reason", err)
	}
	if strings.Count(err.Error(), ErrNoSchedIdle.Error()) != 1 {
		t.Errorf("got %q, want the sentinel's text once", err)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-c", "0"}, "-c must be in 1..1000, got 0"},
		{[]string{"-c", "1001"}, "-c must be in 1..1000, got 1001"},
		{[]string{"now"}, `takes no arguments, got ["now"]`},
		{[]string{"-passes", "10"}, `want MIN-MAX, two integers, got "10"`},
		{[]string{"-passes", "20-10"}, "-passes must be MIN-MAX with 1 <= MIN <= MAX <= 1000000, got 20-10"},
		{[]string{"-passes", "0-10"}, "got 0-10"},
		{[]string{"-call-pct", "101"}, "-call-pct must be in 0..100, got 101"},
		{[]string{"-call-pct", "50"}, "-call-passes must be MIN-MAX with 1 <= MIN <= MAX <= 1000000, got 0-0"},
		{[]string{"-pause", "-1s"}, "-pause must be in 0..10s, got -1s"},
		{[]string{"-pause", "11s"}, "-pause must be in 0..10s, got 11s"},
	} {
		var stdout, stderr bytes.Buffer
		lower := func() (int, error) { t.Fatal("lowered the threads before checking the flags"); return 0, nil }
		err := serve(context.Background(), Command, tt.args, strings.NewReader(""), &stdout, &stderr, lower)
		if err == nil || !strings.Contains(err.Error(), tt.want) || stdout.Len() != 0 {
			t.Errorf("%q: got %v (stdout %q), want an error containing %q and no stdout", tt.args, err, stdout.String(), tt.want)
		}
	}
}

func TestPassesPerSecondSince(t *testing.T) {
	a, b := Count{Passes: 100, UptimeS: 1}, Count{Passes: 400, UptimeS: 2.5}
	if got := b.PassesPerSecondSince(a); got != 200 {
		t.Errorf("got %v passes/s, want 200", got)
	}
	if got := a.PassesPerSecondSince(b); got != 0 {
		t.Errorf("backwards: got %v, want 0", got)
	}
}

// TestCanceledWhileWaitingForALine: a signal (ctx) ends the command while
// its input is open and silent, as when it runs by hand or a script
// keeps its stdin open; the running passes stop with it.
func TestCanceledWhileWaitingForALine(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, NeighborCommand, []string{"-c", "1"}, r, &stdout, &stderr, func() (int, error) { return 0, nil })
	}()
	if _, err := w.WriteString("run\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the command did not end within 5 s of its context")
	}
	w.Close() // ends the reading goroutine, for goleak
}

// TestStopKillsAChildThatDoesNotExit: a child that goes on past its
// stdin's end is killed after the grace, without an error (the counts
// were all answered), and Stop returns once it is reaped.
func TestStopKillsAChildThatDoesNotExit(t *testing.T) {
	grace := stopGrace
	stopGrace = 100 * time.Millisecond
	t.Cleanup(func() { stopGrace = grace })
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=deaf")
	childproc.DieWithParent(cmd)
	p, err := Start(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := p.Stop(); err != nil {
		t.Errorf("Stop: got %v, want nil (a kill after the grace is not an error)", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Stop took %v, want about the grace", took)
	}
	select {
	case <-p.exited:
	default:
		t.Error("Stop returned before the child was reaped")
	}
}
