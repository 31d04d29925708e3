//go:build linux

// IsolationOSPriority's CPU budget: GOMAXPROCS from the environment or the program, and cgroup limits.

package cpusched

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// budgetChildEnv marks the child process of TestOSPriorityBudgetFromEnv.
const budgetChildEnv = "CPUSCHED_TEST_BUDGET_CHILD"

// TestOSPriorityBudgetFromEnv checks that IsolationOSPriority takes its
// worker count from GOMAXPROCS as the operator set it, not from NumCPU:
// with GOMAXPROCS=1 in the environment, New gets 1 worker and raises
// GOMAXPROCS to 2, and Close sets 1 again. The environment variable is
// read at process start, so the check runs in a child process.
func TestOSPriorityBudgetFromEnv(t *testing.T) {
	if os.Getenv(budgetChildEnv) != "" {
		checkBudgetInChild(t)
		return
	}
	if err := probeOSPriority(); err != nil {
		t.Skipf("thread priorities cannot be lowered here: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOSPriorityBudgetFromEnv$", "-test.v")
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1", budgetChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "budget checked") {
		t.Fatalf("child with GOMAXPROCS=1: %v\n%s", err, out)
	}
}

func checkBudgetInChild(t *testing.T) {
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS at start = %d, want 1 from the environment", got)
	}
	s, err := New(WithIsolation(IsolationOSPriority))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Workers(); got != 1 {
		t.Errorf("Workers = %d, want 1 (GOMAXPROCS=1), not NumCPU %d", got, runtime.NumCPU())
	}
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Errorf("GOMAXPROCS while open = %d, want 2 (1 worker + 1 spare)", got)
	}
	// GOMAXPROCS=1 on more CPUs is not one CPU: where threads can be
	// raised, tasks still run on their own goroutines.
	if probeOSRestore() == nil && runtime.NumCPU() > 1 && !s.Stats().ThreadsRaisable {
		t.Errorf("GOMAXPROCS=1 on %d CPUs: ThreadsRaisable false, want true (the one-CPU path is for one CPU)", runtime.NumCPU())
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS after Close = %d, want 1 again", got)
	}
	t.Log("budget checked")
}

const oneCPUChildEnv = "CPUSCHED_TEST_ONE_CPU_CHILD"

// TestOSPriorityOneCPUHandsOff runs the test binary confined to one CPU
// (its affinity mask, as a one-CPU cpuset gives it): there every task is
// handed off, as where threads cannot be raised, though as root here
// they could be (docs/design.md#one-cpu).
func TestOSPriorityOneCPUHandsOff(t *testing.T) {
	if os.Getenv(oneCPUChildEnv) != "" {
		checkOneCPUInChild(t)
		return
	}
	if err := probeOSPriority(); err != nil {
		t.Skipf("thread priorities cannot be lowered here: %v", err)
	}
	var mask unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mask); err != nil || mask.Count() < 2 {
		t.Skipf("needs 2 CPUs to confine the child to one (mask %v, %v)", mask, err)
	}
	cpu := 0
	for !mask.IsSet(cpu) {
		cpu++
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOSPriorityOneCPUHandsOff$", "-test.v")
	cmd.Env = append(os.Environ(), oneCPUChildEnv+"=1")
	// The child inherits the mask of the thread that forks it.
	runtime.LockOSThread()
	var one unix.CPUSet
	one.Set(cpu)
	err := unix.SchedSetaffinity(0, &one)
	var out []byte
	if err == nil {
		out, err = cmd.CombinedOutput()
	}
	if rerr := unix.SchedSetaffinity(0, &mask); rerr != nil {
		t.Fatalf("restoring the thread's mask: %v", rerr) // the thread stays locked: the runtime ends it
	}
	runtime.UnlockOSThread()
	if err != nil || !strings.Contains(string(out), "one CPU checked") {
		t.Fatalf("child on CPU %d: %v\n%s", cpu, err, out)
	}
}

func checkOneCPUInChild(t *testing.T) {
	if n := runtime.NumCPU(); n != 1 {
		t.Fatalf("NumCPU = %d, want 1 from the mask", n)
	}
	s, err := New(WithIsolation(IsolationOSPriority))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if st := s.Stats(); st.ThreadsRaisable || s.osOwn() {
		t.Errorf("one CPU: ThreadsRaisable %v, own goroutines %v; want every task handed off (false, false)", st.ThreadsRaisable, s.osOwn())
	}
	// A task runs, on a hand-off thread at nice 10.
	var nice int
	if err := s.Run(context.Background(), func(*Task) error {
		time.Sleep(time.Millisecond) // past the hand-off thread's lowering
		var err error
		nice, err = unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if want := 20 - unraisableNice; nice != want && !s.Stats().Contended {
		t.Errorf("the task's thread: getpriority %d, want %d (nice %d)", nice, want, unraisableNice)
	}
	t.Log("one CPU checked")
}

// TestOSPriorityRestoresProgramsGOMAXPROCS checks the restore when the
// program had set GOMAXPROCS itself: the runtime's default would differ,
// so Close sets the program's value again instead of the default.
func TestOSPriorityRestoresProgramsGOMAXPROCS(t *testing.T) {
	if err := probeOSPriority(); err != nil {
		t.Skipf("thread priorities cannot be lowered here: %v", err)
	}
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs so that 1 is not the default")
	}
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	s, err := New(WithIsolation(IsolationOSPriority))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Workers(); got != 1 {
		t.Errorf("Workers = %d, want 1 (the program's GOMAXPROCS)", got)
	}
	s.Close(context.Background())
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS after Close = %d, want the program's 1", got)
	}
}

// cgroupChildEnv marks the child process of
// TestOSPriorityWorkersUnderACgroupLimit; its value is the GOMAXPROCS
// variable the parent set ("" for none) and so the worker count to expect.
const cgroupChildEnv = "CPUSCHED_TEST_CGROUP_CHILD"

// TestOSPriorityWorkersUnderACgroupLimit runs the test binary inside a real
// cgroup limited to 1.5 CPUs (root only): the default Scheduler there
// reads the limit and runs 1 worker, unless the GOMAXPROCS variable is set.
func TestOSPriorityWorkersUnderACgroupLimit(t *testing.T) {
	if want, ok := os.LookupEnv(cgroupChildEnv); ok {
		checkWorkersInCgroupChild(t, want)
		return
	}
	if err := probeOSPriority(); err != nil {
		t.Skipf("thread priorities cannot be lowered here: %v", err)
	}
	if runtime.NumCPU() != 2 {
		t.Skip("the expected counts are for 2 CPUs")
	}
	procs := makeTestCgroup(t, 1.5)
	for _, env := range []string{"", "2"} {
		// The shell moves itself into the cgroup, then becomes the test
		// binary, which so starts there (the runtime reads the limit at
		// start-up).
		cmd := exec.Command("/bin/sh", "-c", `echo $$ > "$1" || exit 126; shift; exec "$@"`, "sh", procs,
			os.Args[0], "-test.run=^TestOSPriorityWorkersUnderACgroupLimit$", "-test.v")
		cmd.Env = append(os.Environ(), cgroupChildEnv+"="+env)
		if env != "" {
			cmd.Env = append(cmd.Env, "GOMAXPROCS="+env)
		}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "workers checked") {
			t.Errorf("child in a 1.5-CPU cgroup, GOMAXPROCS=%q: %v\n%s", env, err, out)
		}
	}
}

func checkWorkersInCgroupChild(t *testing.T, env string) {
	cpus, ok, err := cgroupLimit()
	if err != nil || !ok || cpus != 1.5 {
		t.Fatalf("the child read the limit as %v, %v, %v; want 1.5", cpus, ok, err)
	}
	want := 1
	if env != "" {
		want = 2 // the operator's GOMAXPROCS is the budget
	}
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("GOMAXPROCS at start = %d, want 2 (the runtime's max(2, ceil(1.5)))", got)
	}
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if st := s.Stats(); st.Isolation != IsolationOSPriority {
		t.Skipf("isolation %v", st.Isolation)
	}
	if got := s.Workers(); got != want {
		t.Errorf("Workers = %d, want %d (GOMAXPROCS variable %q)", got, want, env)
	}
	t.Log("workers checked")
}

// makeTestCgroup makes a cpu cgroup limited to cpus CPUs (cgroup v1's cpu
// hierarchy, or v2 with the cpu controller delegated), removed when the
// test ends, and returns its cgroup.procs file. It skips the test where
// that cannot be done (not root, no writable cpu controller).
func makeTestCgroup(t *testing.T, cpus float64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a cgroup needs root")
	}
	const period = 100000
	quota := strconv.Itoa(int(cpus * period))
	name := fmt.Sprintf("cpusched-test-%d", os.Getpid())
	var dir string
	var files [][2]string
	if sub, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control"); err == nil && strings.Contains(string(sub), "cpu") {
		dir = filepath.Join("/sys/fs/cgroup", name)
		files = [][2]string{{"cpu.max", quota + " " + strconv.Itoa(period)}}
	} else if _, err := os.Stat("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"); err == nil {
		dir = filepath.Join("/sys/fs/cgroup/cpu", name)
		files = [][2]string{{"cpu.cfs_period_us", strconv.Itoa(period)}, {"cpu.cfs_quota_us", quota}}
	} else {
		t.Skip("no cgroup cpu controller to make a cgroup in")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("removing the test cgroup: %v", err)
		}
	})
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "cgroup.procs")
}
