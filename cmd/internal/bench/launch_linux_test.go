//go:build linux

package bench

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
)

// TestChildrenRunAsAService: in a bench run as root, a server and a
// neighbour started as Run starts them run as uid and gid 65534 with no
// supplementary groups, no capabilities and RLIMIT_NICE 0, read here from
// /proc/PID/status and /proc/PID/limits (not through package unpriv, which
// the launcher's own check uses), in bench's cgroup and in one made for
// the server (the shell that moves it there runs as root first); an
// ospriority server says its threads cannot be raised; and the copy of
// the binary goes with the launcher.
func TestChildrenRunAsAService(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a bench run as root starts its children unprivileged")
	}
	if testing.Short() {
		t.Skip("starts the demo server; skipped with -short")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	cfg := DefaultConfig(cpuschedBin, "serve")
	cfg.NeighborConcurrency = 1
	l, err := newLauncher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mode := cpusched.IsolationNone.String()
	if slices.Contains(AllModes(), cpusched.IsolationOSPriority.String()) {
		mode = cpusched.IsolationOSPriority.String()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	startIn := func(g *cpuCgroup) {
		t.Helper()
		name, args, err := l.command(serverArgs(cfg, mode, 0))
		if err != nil {
			t.Fatal(err)
		}
		srv, err := startServer(ctx, childPlace{cgroup: g}, name, args)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := srv.stop(); err != nil {
				t.Errorf("stopping the server: %v", err)
			}
		}()
		pid := srv.cmd.Process.Pid
		checkService(t, "the server", pid)
		if g != nil {
			if cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); !strings.Contains(string(cg), strings.TrimPrefix(g.dir, g.fs.dir)) {
				t.Errorf("the server's cgroups %q, want %s among them", cg, g.dir)
			}
		}
		if mode != cpusched.IsolationOSPriority.String() {
			return
		}
		st, err := fetchStats(ctx, newClient(1), srv.url)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(srv.banner, " raisable=false") || st.Scheduler.ThreadsRaisable {
			t.Errorf("got banner %q, threads_raisable %v; want raisable=false in both", srv.banner, st.Scheduler.ThreadsRaisable)
		}
	}
	startIn(nil)

	nb, err := startNeighbor(ctx, cfg, l, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkService(t, "the neighbour", nb.PID())
	if err := nb.Stop(); err != nil {
		t.Errorf("stopping the neighbour: %v", err)
	}

	if fs, err := openCgroups(0, "-cgroups"); err != nil {
		t.Logf("no cgroup to start the server in: %v", err)
	} else if g, err := fs.create(nextCgroupName(), 0); err != nil {
		t.Logf("no cgroup to start the server in: %v", err)
	} else {
		startIn(g)
		if err := g.remove(); err != nil {
			t.Error(err)
		}
	}

	copied := l.copied
	if err := l.close(); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(copied); !os.IsNotExist(err) {
		t.Errorf("the binary's copy %s: got %v after close, want it gone", copied, err)
	}
}

// checkService fails t unless process pid runs as uid and gid 65534 (real,
// effective, saved and filesystem ids), with no supplementary group, no
// capability permitted, effective or ambient, and RLIMIT_NICE 0.
func checkService(t *testing.T, what string, pid int) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`(?m)^Uid:\s+65534\s+65534\s+65534\s+65534$`,
		`(?m)^Gid:\s+65534\s+65534\s+65534\s+65534$`,
		`(?m)^Groups:\s*$`,
		`(?m)^CapPrm:\s+0+$`,
		`(?m)^CapEff:\s+0+$`,
		`(?m)^CapAmb:\s+0+$`,
	} {
		if !regexp.MustCompile(want).Match(status) {
			t.Errorf("%s (pid %d): /proc/PID/status has no line matching %s:\n%s", what, pid, want, status)
		}
	}
	if want := `(?m)^Max nice priority\s+0\s+0\s`; !regexp.MustCompile(want).Match(limits) {
		t.Errorf("%s (pid %d): /proc/PID/limits has no line matching %s:\n%s", what, pid, want, limits)
	}
}
