package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeCgroupMount makes a directory tree shaped like /sys/fs/cgroup with a
// cpu controller, v2 (a cgroup2 mount) or v1 (a cpu hierarchy under cpu/),
// and returns its path.
func fakeCgroupMount(t *testing.T, v2 bool) string {
	t.Helper()
	mount := t.TempDir()
	if v2 {
		writeFiles(t, mount, map[string]string{
			"cgroup.controllers":     "cpuset cpu io memory pids\n",
			"cgroup.subtree_control": "cpu memory pids\n",
		})
	} else {
		writeFiles(t, filepath.Join(mount, "cpu"), map[string]string{"cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n"})
	}
	return mount
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fakeKernel plays the kernel's part in a fake tree: mkdir fills a new
// cgroup with the interface files of fs's version, rmdir takes them away.
func fakeKernel(t *testing.T, fs *cgroupFS) {
	files := map[string]string{"cgroup.procs": "", "cpu.stat": "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n"}
	if fs.v2 {
		files["cpu.max"] = "max 100000\n"
		files["cpu.stat"] = "usage_usec 0\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n"
		files["cpu.weight"], files["cgroup.subtree_control"] = "100\n", ""
	} else {
		files["cpu.cfs_quota_us"], files["cpu.cfs_period_us"] = "-1\n", "100000\n"
		files["cpu.shares"] = "1024\n"
	}
	fs.mkdir = func(dir string) error {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		writeFiles(t, dir, files)
		return nil
	}
	fs.rmdir = os.RemoveAll
}

// dirNames returns the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestCgroupWriter(t *testing.T) {
	tests := []struct {
		name      string
		v2        bool
		cpus      float64
		wantDir   string            // relative to the mount
		wantFiles map[string]string // the limit files after create
	}{
		{"v1 1.5 CPUs", false, 1.5, "cpu", map[string]string{"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "150000"}},
		{"v1 0.1 CPUs", false, 0.1, "cpu", map[string]string{"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "10000"}},
		{"v2 1.5 CPUs", true, 1.5, "", map[string]string{"cpu.max": "150000 100000"}},
		{"v2 2 CPUs", true, 2, "", map[string]string{"cpu.max": "200000 100000"}},
		// No limit (-cgroups): the new cgroup's files stay as the kernel made them.
		{"v1 no limit", false, 0, "cpu", map[string]string{"cpu.cfs_period_us": "100000\n", "cpu.cfs_quota_us": "-1\n"}},
		{"v2 no limit", true, 0, "", map[string]string{"cpu.max": "max 100000\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mount := fakeCgroupMount(t, tt.v2)
			fs, err := findCgroupFS(mount)
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(mount, tt.wantDir); fs.dir != want || fs.v2 != tt.v2 {
				t.Fatalf("findCgroupFS: got dir %s v2=%v, want %s v2=%v", fs.dir, fs.v2, want, tt.v2)
			}
			fakeKernel(t, fs)
			before := dirNames(t, fs.dir)

			g, err := fs.create("cpusched-bench-1-1", tt.cpus)
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(fs.dir, "cpusched-bench-1-1"); g.dir != want {
				t.Errorf("cgroup dir: got %s, want %s", g.dir, want)
			}
			for file, want := range tt.wantFiles {
				data, err := os.ReadFile(filepath.Join(g.dir, file))
				if got := string(data); err != nil || got != want {
					t.Errorf("%s: got %q (%v), want %q", file, got, err, want)
				}
			}
			if got, want := g.procsFile(), filepath.Join(g.dir, "cgroup.procs"); got != want {
				t.Errorf("procsFile: got %s, want %s", got, want)
			}
			if _, err := g.readStat(); err != nil {
				t.Errorf("readStat: %v", err)
			}
			if err := g.remove(); err != nil {
				t.Fatal(err)
			}
			if after := dirNames(t, fs.dir); !slices.Equal(after, before) {
				t.Errorf("after remove: got %v in %s, want %v (as before)", after, fs.dir, before)
			}
			if err := g.remove(); err != nil {
				t.Errorf("second remove: got %v, want nil (already gone)", err)
			}
		})
	}
}

func TestCgroupCheckMovesAProcessIn(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		fs, err := findCgroupFS(fakeCgroupMount(t, v2))
		if err != nil {
			t.Fatal(err)
		}
		fakeKernel(t, fs)
		var procs string
		rmdir := fs.rmdir
		fs.rmdir = func(dir string) error {
			data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			procs = string(data)
			return rmdir(dir)
		}
		if err := fs.check(1.5); err != nil {
			t.Fatalf("v2=%v: check: %v", v2, err)
		}
		if strings.TrimSpace(procs) == "" {
			t.Errorf("v2=%v: got an empty cgroup.procs, want the shell's pid written to it", v2)
		}
		for _, name := range dirNames(t, fs.dir) {
			if strings.HasPrefix(name, cgroupNamePrefix) {
				t.Errorf("v2=%v: got %s left after check, want it removed", v2, name)
			}
		}
	}
}

func TestFindCgroupFSErrors(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		wantErr string
	}{
		{"nothing", nil, "no cpu controller"},
		{"v2 without cpu", map[string]string{"cgroup.controllers": "memory pids\n", "cgroup.subtree_control": ""}, "cgroup v2 without the cpu controller"},
		{"v2 cpu not delegated", map[string]string{"cgroup.controllers": "cpu memory\n", "cgroup.subtree_control": "memory\n"}, "echo +cpu >"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mount := t.TempDir()
			writeFiles(t, mount, tt.files)
			fs, err := findCgroupFS(mount)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got (%v, %v), want an error containing %q", fs, err, tt.wantErr)
			}
		})
	}
}

func TestCgroupCreateFailures(t *testing.T) {
	t.Run("no cpu files", func(t *testing.T) {
		// mkdir on a hierarchy without the cpu controller: no limit files.
		fs, err := findCgroupFS(fakeCgroupMount(t, false))
		if err != nil {
			t.Fatal(err)
		}
		before := dirNames(t, fs.dir)
		if g, err := fs.create("cpusched-bench-1-1", 1); err == nil || !strings.Contains(err.Error(), "cpu.cfs_period_us") {
			t.Errorf("got (%v, %v), want an error naming cpu.cfs_period_us", g, err)
		}
		if after := dirNames(t, fs.dir); !slices.Equal(after, before) {
			t.Errorf("got %v after the failure, want %v (the new directory removed)", after, before)
		}
	})
	t.Run("permission", func(t *testing.T) {
		fs := &cgroupFS{dir: t.TempDir(), rmdir: os.Remove,
			mkdir: func(dir string) error { return &os.PathError{Op: "mkdir", Path: dir, Err: syscall.EACCES} }}
		if _, err := fs.create("x", 1); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("got %v, want a permission error", err)
		}
	})
}

func TestCgroupRemoveGivesUp(t *testing.T) {
	defer func(d time.Duration) { removeTimeout = d }(removeTimeout)
	removeTimeout = 50 * time.Millisecond
	calls := 0
	fs := &cgroupFS{rmdir: func(string) error { calls++; return syscall.EBUSY }}
	g := &cpuCgroup{fs: fs, dir: "/fake/cpusched-bench-1-1"}
	if err := g.remove(); err == nil || !strings.Contains(err.Error(), "device or resource busy") {
		t.Errorf("got %v, want the busy error after the retries", err)
	}
	if calls < 2 {
		t.Errorf("got %d rmdir calls, want retries", calls)
	}
}

func TestParseCPUStat(t *testing.T) {
	v1 := "nr_periods 75\nnr_throttled 70\nthrottled_time 1750000000\nnr_bursts 0\nburst_time 0\n"
	v2 := "usage_usec 123\nuser_usec 100\nsystem_usec 23\nnr_periods 75\nnr_throttled 70\nthrottled_usec 1750000\nnr_bursts 0\nburst_usec 0\n"
	for name, text := range map[string]string{"v1": v1, "v2": v2} {
		s, err := parseCPUStat([]byte(text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s.serverCPU = 3 * time.Second
		got := *s.since(cpuStat{periods: 5, throttled: 10, throttledTime: 250 * time.Millisecond, serverCPU: 2 * time.Second}, 2*time.Second)
		if want := (CgroupCPUStat{Periods: 70, Throttled: 60, ThrottledMs: 1500, ServerCPUs: 0.5}); got != want {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}
	for _, bad := range []string{"", "usage_usec 5\n", "nr_periods x\n"} {
		if _, err := parseCPUStat([]byte(bad)); err == nil {
			t.Errorf("parseCPUStat(%q): got nil error, want one", bad)
		}
	}
}

func TestInCgroupStartsTheCommandThere(t *testing.T) {
	dir := t.TempDir()
	g := &cpuCgroup{dir: dir}
	// The command stays (exec sleep, same pid) until stop: startCmd's
	// goroutine waits for the child, and Wait closes the stdout pipe once
	// the child has exited, so a command that exited at once sometimes
	// lost its output before the Read below.
	name, args := g.inCgroup("sh", []string{"-c", `echo "$$ $0 $1"; exec sleep 60`, "arg 0", "arg 1"})
	c, err := startChild(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 100)
	n, _ := c.stdout.Read(out)
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}
	procs, err := os.ReadFile(g.procsFile())
	if err != nil {
		t.Fatal(err)
	}
	// The command runs as the shell that moved itself: same pid, and its
	// arguments arrive intact.
	if want := strings.TrimSpace(string(procs)) + " arg 0 arg 1\n"; string(out[:n]) != want {
		t.Errorf("got %q, want %q", out[:n], want)
	}
}

func TestStartServerInCgroupThatCannotBeEntered(t *testing.T) {
	g := &cpuCgroup{dir: filepath.Join(t.TempDir(), "missing")}
	srv, err := startServer(t.Context(), childPlace{cgroup: g}, "sh", []string{"-c", "sleep 60"})
	if err == nil {
		srv.stop()
		t.Fatal("got nil error, want one")
	}
	for _, want := range []string{"exited before it printed its address", "exit status 126", "cgroup.procs"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got error %q, want it to contain %q", err, want)
		}
	}
}

func TestReportWithCPUQuota(t *testing.T) {
	rep := handMadeReport()
	rep.Config.CPUQuota, rep.Config.Cgroup = 1.5, "cgroup v1 /sys/fs/cgroup/cpu"
	for i := range rep.Results {
		rep.Results[i].CgroupCPU = &CgroupCPUStat{Periods: 70, Throttled: int64(10 * i), ThrottledMs: 1234.4 * float64(i), ServerCPUs: 0.5 * float64(i)}
	}

	var buf bytes.Buffer
	if err := rep.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"quota:   every server in its own cgroup limited to 1.5 CPUs (150000 us per 100000 us period; cgroup v1 /sys/fs/cgroup/cpu), " +
			"the floor's hog in its server's, and so is the neighbour unless -cgroups gives it its own; the load generator outside\n",
		"floor: idle 0/70 0 ms (0.00 CPUs), hog-sched 10/70 1,234 ms (0.50 CPUs), io-heavy 20/70 2,469 ms (1.00 CPUs), " +
			"neighbor-alone 30/70 3,703 ms (1.50 CPUs), neighbor 40/70 4,938 ms (2.00 CPUs)\n",
		"none: idle 50/70 6,172 ms (2.50 CPUs), hog-direct 60/70 7,406 ms (3.00 CPUs), hog-sched 70/70 8,641 ms (3.50 CPUs), " +
			"hog-nockpt 80/70 9,875 ms (4.00 CPUs), hog-sched+small 90/70 11,110 ms (4.50 CPUs), io-heavy 100/70 12,344 ms (5.00 CPUs), " +
			"neighbor 110/70 13,578 ms (5.50 CPUs), auto 120/70 14,813 ms (6.00 CPUs)\n",
		"reserve: neighbor 130/70 16,047 ms (6.50 CPUs)\n",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table output lacks %q; got:\n%s", want, buf.String())
		}
	}

	buf.Reset()
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Config  map[string]any   `json:"config"`
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Config["cpu_quota"] != 1.5 || doc.Config["cgroup"] != "cgroup v1 /sys/fs/cgroup/cpu" {
		t.Errorf("config: got cpu_quota %v, cgroup %v; want 1.5 and the cgroup", doc.Config["cpu_quota"], doc.Config["cgroup"])
	}
	got, _ := doc.Results[1]["cgroup_cpu_stat"].(map[string]any)
	if want := map[string]any{"nr_periods": 70.0, "nr_throttled": 10.0, "throttled_ms": 1234.4, "server_cpus": 0.5}; !reflect.DeepEqual(got, want) {
		t.Errorf("cgroup_cpu_stat: got %v, want %v", got, want)
	}
}

func TestParseProcCPUTime(t *testing.T) {
	// utime 150 and stime 25 ticks: 1.75 s; the command name has a space
	// and a parenthesis.
	stat := "4242 (cpu sched) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 25 0 0 20 0 9 0 100 1000000 500\n"
	got, err := parseProcCPUTime([]byte(stat))
	if err != nil || got != 1750*time.Millisecond {
		t.Errorf("got (%v, %v), want 1.75s", got, err)
	}
	for _, bad := range []string{"", "4242 (x) S 1 2", "4242 (x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 abc 25 0"} {
		if _, err := parseProcCPUTime([]byte(bad)); err == nil {
			t.Errorf("parseProcCPUTime(%q): got nil error, want one", bad)
		}
	}
}
