//go:build linux

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
)

// needTwoCPUs skips t where this process may use fewer than 2 CPUs, and
// returns -cpuset's halves.
func needTwoCPUs(t *testing.T) (server, others []int) {
	t.Helper()
	server, others, err := CPUSetHalves()
	if err != nil {
		t.Skipf("no CPUs to split: %v", err)
	}
	return server, others
}

// allowedList returns the Cpus_allowed_list of /proc/PROC/status (PROC:
// "self", a pid, or "PID/task/TID"), read here with a regexp rather than
// processCPUs, which the code under test uses.
func allowedList(t *testing.T, proc string) string {
	t.Helper()
	status, err := os.ReadFile("/proc/" + proc + "/status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^Cpus_allowed_list:\s*(\S+)$`).FindSubmatch(status)
	if m == nil {
		t.Fatalf("/proc/%s/status has no Cpus_allowed_list:\n%s", proc, status)
	}
	return string(m[1])
}

// threadLists returns the Cpus_allowed_list of every thread of process
// proc ("self" or a pid), by thread id.
func threadLists(t *testing.T, proc string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir("/proc/" + proc + "/task")
	if err != nil {
		t.Fatal(err)
	}
	lists := map[string]string{}
	for _, e := range entries {
		if status, err := os.ReadFile(filepath.Join("/proc", proc, "task", e.Name(), "status")); err == nil {
			if m := regexp.MustCompile(`(?m)^Cpus_allowed_list:\s*(\S+)$`).FindSubmatch(status); m != nil {
				lists[e.Name()] = string(m[1])
			}
		}
	}
	return lists
}

// TestStartOnCPUs: a child started by childPlace.start runs on its CPUs
// only, and the thread that started it has its own mask back.
func TestStartOnCPUs(t *testing.T) {
	_, others := needTwoCPUs(t)
	runtime.LockOSThread() // the thread whose mask start borrows
	defer runtime.UnlockOSThread()
	before := allowedList(t, "thread-self")
	place := childPlace{cpus: others[len(others)-1:]}
	var c *child
	if err := place.start(func() (err error) { c, err = startChild("sleep", "30"); return err }); err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	if got, want := allowedList(t, fmt.Sprint(c.cmd.Process.Pid)), FormatCPUs(place.cpus); got != want {
		t.Errorf("the child may run on CPU %s, want %s", got, want)
	}
	if err := place.check(c.cmd.Process.Pid, "the child"); err != nil {
		t.Error(err)
	}
	if after := allowedList(t, "thread-self"); after != before {
		t.Errorf("the starting thread's CPUs: got %s after the start, want %s as before", after, before)
	}
	if err := (childPlace{cpus: []int{others[0] + 1000}}).check(c.cmd.Process.Pid, "the child"); err == nil || !strings.Contains(err.Error(), "may run on CPU "+FormatCPUs(place.cpus)) {
		t.Errorf("check against other CPUs: got %v, want an error naming both lists", err)
	}
}

// TestPinProcess: every thread of bench goes to the CPUs given, and back.
func TestPinProcess(t *testing.T) {
	_, others := needTwoCPUs(t)
	before := threadLists(t, "self")
	restore, err := pinProcess(others)
	if err != nil {
		t.Fatal(err)
	}
	for tid, list := range threadLists(t, "self") {
		if list != FormatCPUs(others) {
			t.Errorf("pinned: thread %s may run on CPU %s, want %s", tid, list, FormatCPUs(others))
		}
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	for tid, list := range threadLists(t, "self") {
		if was, ok := before[tid]; ok && list != was {
			t.Errorf("restored: thread %s may run on CPU %s, want %s as before", tid, list, was)
		}
	}
}

// TestChildrenInTheirShape: in a bench run as root with -cpuset and
// -server-procs 1, the server and the floor's hog, started as Run starts
// them (through `cpusched unprivileged`, and under a CPU quota where a
// cgroup can be made: the shell moves in as root, then the wrapper drops
// to 65534), run as a service on the servers' CPUs, every thread of them,
// with GOMAXPROCS=1, in the same cgroup; and the neighbour on the other
// CPUs with bench's environment. Read here from /proc.
func TestChildrenInTheirShape(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a bench run as root starts its children through the unprivileged launcher")
	}
	server, others := needTwoCPUs(t)
	if testing.Short() {
		t.Skip("starts the demo server; skipped with -short")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	cfg := DefaultConfig(cpuschedBin, "serve")
	cfg.CPUSet, cfg.ServerProcs, cfg.NeighborConcurrency, cfg.HogConcurrency = true, 1, 1, 2
	l, err := newLauncher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var quota *cpuCgroup // where the quota's cgroups can be made
	if fs, err := openCgroups(1, "-cpu-quota"); err != nil {
		t.Logf("no CPU quota: %v", err)
	} else if quota, err = fs.create(nextCgroupName(), 1); err != nil {
		t.Logf("no CPU quota: %v", err)
	} else {
		defer func() {
			if err := quota.remove(); err != nil {
				t.Error(err)
			}
		}()
	}

	hog, err := startIdleHog(ctx, cfg, l, quota)
	if err != nil {
		t.Fatal(err)
	}
	defer hog.Stop()
	name, args, err := l.command(serverArgs(cfg, cpusched.IsolationNone.String(), 0))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := startServer(ctx, l.place(serverRole, quota), name, args)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.stop()
	nb, err := startNeighbor(ctx, cfg, l, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Stop()

	if !strings.Contains(srv.banner, "gomaxprocs=1") {
		t.Errorf("the server's banner %q, want gomaxprocs=1", srv.banner)
	}
	for _, c := range []struct {
		what     string
		pid      int
		cpus     []int
		gomaxenv bool
	}{
		{"the server", srv.cmd.Process.Pid, server, true},
		{"the floor's hog", hog.PID(), server, true},
		{"the neighbour", nb.PID(), others, false},
	} {
		checkService(t, c.what, c.pid)
		for tid, list := range threadLists(t, fmt.Sprint(c.pid)) {
			if list != FormatCPUs(c.cpus) {
				t.Errorf("%s (pid %d): thread %s may run on CPU %s, want %s", c.what, c.pid, tid, list, FormatCPUs(c.cpus))
			}
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", c.pid))
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(strings.Split(string(env), "\x00"), "GOMAXPROCS=1"); got != c.gomaxenv {
			t.Errorf("%s (pid %d): GOMAXPROCS=1 in its environment %v, want %v", c.what, c.pid, got, c.gomaxenv)
		}
	}
	if quota != nil {
		rel := strings.TrimPrefix(quota.dir, quota.fs.dir)
		for _, c := range []struct {
			what string
			pid  int
		}{{"the server", srv.cmd.Process.Pid}, {"the floor's hog", hog.PID()}} {
			if cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", c.pid)); !strings.Contains(string(cg), rel) {
				t.Errorf("%s's cgroups %q, want the quota's %s among them", c.what, cg, quota.dir)
			}
		}
	}
}
