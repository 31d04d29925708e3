//go:build linux

package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cgroupChildEnv makes the test binary a child for TestChildSeesCPUQuota:
// it prints GOMAXPROCS and its cpu cgroup, then keeps two threads busy for
// a while so that its cgroup gets throttled.
const cgroupChildEnv = "BENCH_TEST_CGROUP_CHILD"

// runCgroupChild is the child's whole life; TestMain calls it first.
func runCgroupChild() {
	fmt.Printf("gomaxprocs %d\n", runtime.GOMAXPROCS(0))
	fmt.Printf("cgroup %s\n", cpuCgroupOf("/proc/self/cgroup"))
	done := make(chan struct{})
	for range 2 {
		go func() {
			for start := time.Now(); time.Since(start) < 400*time.Millisecond; {
			}
			done <- struct{}{}
		}()
	}
	<-done
	<-done
	os.Exit(0)
}

// cpuCgroupOf returns the cpu controller's cgroup path in a
// /proc/PID/cgroup file: the v1 line that lists cpu, else the v2 line.
func cpuCgroupOf(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	v2 := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			v2 = parts[2]
		}
		if slices.Contains(strings.Split(parts[1], ","), "cpu") {
			return parts[2]
		}
	}
	return v2
}

// TestChildSeesCPUQuota starts a child the way Run starts a server under
// -cpu-quota, on this machine's real cgroups (root only), and checks that
// it ran inside the cgroup from its start, with the runtime's GOMAXPROCS for
// that limit, and was throttled to it; and that the cgroup is gone after.
// The quota is the smallest, 0.1 CPU, so that the child uses it up in its
// periods even when other processes keep the machine busy (at 1 CPU, two
// busy threads were not throttled once with the load average at 9).
func TestChildSeesCPUQuota(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make cgroups")
	}
	fs, err := openCPUQuota(MinCPUQuota)
	if err != nil {
		t.Skipf("no writable cgroup with a cpu controller here: %v", err)
	}
	g, err := fs.create(nextCgroupName(), MinCPUQuota)
	if err != nil {
		t.Fatal(err)
	}
	defer g.remove()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	name, args := g.inCgroup(exe, []string{"-test.run=^$"})
	cmd := exec.Command(name, args...)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") }), cgroupChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	stat, err := g.readStat()
	if err != nil {
		t.Fatal(err)
	}

	// The runtime's rule (runtime/cgroup_linux.go): max(2, ceil(limit)),
	// capped at NumCPU. On a 2-CPU machine that is 2 with or without the
	// limit; the throttling below is what shows the limit there.
	wantProcs := min(runtime.NumCPU(), max(2, int(math.Ceil(MinCPUQuota))))
	wantCgroup := strings.TrimPrefix(g.dir, fs.dir)
	if got := string(out); !strings.Contains(got, "gomaxprocs "+strconv.Itoa(wantProcs)+"\n") || !strings.Contains(got, "cgroup "+wantCgroup+"\n") {
		t.Errorf("child said %q, want gomaxprocs %d and cgroup %s", got, wantProcs, wantCgroup)
	}
	// Two threads busy for 400 ms under a 0.1-CPU limit use up the quota
	// in every 100 ms period.
	if stat.throttled == 0 {
		t.Errorf("cpu.stat: got %+v, want throttled periods", stat)
	}
	if mine := cpuCgroupOf("/proc/self/cgroup"); mine == wantCgroup {
		t.Errorf("the test process itself is in %s, want it outside", mine)
	}
	if err := g.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after remove: got %v, want it gone", g.dir, err)
	}
}

func TestRemoveStaleCgroups(t *testing.T) {
	fs, err := findCgroupFS(fakeCgroupMount(t, true))
	if err != nil {
		t.Fatal(err)
	}
	fakeKernel(t, fs)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := fmt.Sprintf("%s%d-1", cgroupNamePrefix, gone.Process.Pid)
	mine := fmt.Sprintf("%s%d-1", cgroupNamePrefix, os.Getpid())
	other := "system.slice"
	for _, name := range []string{stale, mine, other} {
		if err := fs.mkdir(filepath.Join(fs.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	removeStaleCgroups(fs)
	names := dirNames(t, fs.dir)
	if slices.Contains(names, stale) || !slices.Contains(names, mine) || !slices.Contains(names, other) {
		t.Errorf("got %v, want %s removed and %s, %s kept", names, stale, mine, other)
	}
}

// TestRunWithoutCPUControllerStartsNothing: a cgroup mount where the cgroup
// cannot be limited makes Run fail with ErrCPUQuota before any server.
func TestRunWithoutCPUControllerStartsNothing(t *testing.T) {
	defer func(m string) { cgroupMount = m }(cgroupMount)
	cgroupMount = fakeCgroupMount(t, false) // real mkdir: no limit files appear
	cfg := DefaultConfig("/nonexistent/cpusched", "serve")
	cfg.CPUQuota = 1.5
	rep, err := Run(context.Background(), cfg)
	if rep != nil || !errors.Is(err, ErrCPUQuota) || !strings.Contains(err.Error(), "cpu.cfs_period_us") {
		t.Errorf("got (%v, %v), want (nil, ErrCPUQuota naming cpu.cfs_period_us)", rep, err)
	}
	if names := dirNames(t, filepath.Join(cgroupMount, "cpu")); len(names) != 2 {
		t.Errorf("got %v in the cpu hierarchy, want only its two files", names)
	}
}
