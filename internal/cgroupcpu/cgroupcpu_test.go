package cgroupcpu

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cpusched/cpusched/internal/faketree"
)

// The mountinfo of a cgroup v1 host (this project's machines) and of a
// cgroup v2 host, with the cgroup files that tests add.
const (
	v1Mountinfo = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	v2Mountinfo = `25 30 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
`
)

func TestLimit(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string
		want   float64
		wantOK bool
	}{
		{
			name: "v1 quota on the process's cgroup",
			files: map[string]string{
				"proc/self/cgroup":                         "2:cpuacct:/\n1:cpu:/box\n0::/\n",
				"proc/self/mountinfo":                      v1Mountinfo,
				"sys/fs/cgroup/cpu/cpu.cfs_quota_us":       "-1\n",
				"sys/fs/cgroup/cpu/cpu.cfs_period_us":      "100000\n",
				"sys/fs/cgroup/cpu/box/cpu.cfs_quota_us":   "150000\n",
				"sys/fs/cgroup/cpu/box/cpu.cfs_period_us":  "100000\n",
				"sys/fs/cgroup/unified/box/cpu.max":        "50000 100000\n", // v1 cpu wins
				"sys/fs/cgroup/unified/cgroup.controllers": "",
			},
			want: 1.5, wantOK: true,
		},
		{
			name: "v1 controllers mounted together, an ancestor's quota is smaller",
			files: map[string]string{
				"proc/self/cgroup":                                "3:cpu,cpuacct:/a/b\n",
				"proc/self/mountinfo":                             "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n",
				"sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_quota_us":    "100000\n",
				"sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_period_us":   "100000\n",
				"sys/fs/cgroup/cpu,cpuacct/a/b/cpu.cfs_quota_us":  "300000\n",
				"sys/fs/cgroup/cpu,cpuacct/a/b/cpu.cfs_period_us": "100000\n",
			},
			want: 1, wantOK: true,
		},
		{
			name: "v1 without a quota",
			files: map[string]string{
				"proc/self/cgroup":                        "1:cpu:/box\n",
				"proc/self/mountinfo":                     v1Mountinfo,
				"sys/fs/cgroup/cpu/box/cpu.cfs_quota_us":  "-1\n",
				"sys/fs/cgroup/cpu/box/cpu.cfs_period_us": "100000\n",
			},
		},
		{
			name: "v2 cpu.max, the root has no file",
			files: map[string]string{
				"proc/self/cgroup":                     "0::/user.slice/app\n",
				"proc/self/mountinfo":                  v2Mountinfo,
				"sys/fs/cgroup/user.slice/cpu.max":     "max 100000\n",
				"sys/fs/cgroup/user.slice/app/cpu.max": "250000 100000\n",
			},
			want: 2.5, wantOK: true,
		},
		{
			name: "v2 without a limit",
			files: map[string]string{
				"proc/self/cgroup":          "0::/app\n",
				"proc/self/mountinfo":       v2Mountinfo,
				"sys/fs/cgroup/app/cpu.max": "max 100000\n",
			},
		},
		{
			name: "v2 in a cgroup namespace: the mount's root is the process's cgroup",
			files: map[string]string{
				"proc/self/cgroup":      "0::/\n",
				"proc/self/mountinfo":   "25 30 0:23 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
				"sys/fs/cgroup/cpu.max": "50000 100000\n",
			},
			want: 0.5, wantOK: true,
		},
		{
			name: "the process's cgroup is not under the mounted root",
			files: map[string]string{
				"proc/self/cgroup":      "0::/elsewhere\n",
				"proc/self/mountinfo":   "25 30 0:23 /mine /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
				"sys/fs/cgroup/cpu.max": "50000 100000\n",
			},
		},
		{
			name:  "no /proc",
			files: map[string]string{"etc/hostname": "x\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := faketree.New(t, tt.files)
			dir, got, ok, err := limitUnder(root)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("limit = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
			// The directory is the cgroup whose limit it is: one of its
			// limit files holds it.
			if ok {
				v1, _, _, err1 := readLimitFiles(dir)
				if err1 != nil || v1 != got {
					t.Errorf("the limit's directory %s holds %v (%v), want %v", strings.TrimPrefix(dir, root), v1, err1, got)
				}
			} else if dir != "" {
				t.Errorf("no limit, yet a directory %q", dir)
			}
		})
	}
}

func TestLimitBadFilesNameTheFile(t *testing.T) {
	tests := []struct {
		name, file, content string
	}{
		{"v1 quota not a number", "sys/fs/cgroup/cpu/box/cpu.cfs_quota_us", "lots\n"},
		{"v1 period zero", "sys/fs/cgroup/cpu/box/cpu.cfs_period_us", "0\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{
				"proc/self/cgroup":                        "1:cpu:/box\n",
				"proc/self/mountinfo":                     v1Mountinfo,
				"sys/fs/cgroup/cpu/box/cpu.cfs_quota_us":  "150000\n",
				"sys/fs/cgroup/cpu/box/cpu.cfs_period_us": "100000\n",
			}
			files[tt.file] = tt.content
			_, _, _, err := limitUnder(faketree.New(t, files))
			if err == nil || !strings.Contains(err.Error(), filepath.Base(tt.file)) {
				t.Errorf("err = %v, want one naming %s", err, tt.file)
			}
		})
	}
	files := map[string]string{
		"proc/self/cgroup":          "0::/app\n",
		"proc/self/mountinfo":       v2Mountinfo,
		"sys/fs/cgroup/app/cpu.max": "150000\n",
	}
	if _, _, _, err := limitUnder(faketree.New(t, files)); err == nil || !strings.Contains(err.Error(), "cpu.max") {
		t.Errorf("v2 cpu.max with one field: err = %v, want one naming cpu.max", err)
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/sys/fs/cgroup`:     "/sys/fs/cgroup",
		`/mnt/with\040space`: "/mnt/with space",
		`/trailing\04`:       `/trailing\04`,
		`/not\999octal`:      `/not\999octal`,
	} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLimitHere reads this machine's limit: it must not fail, whatever it
// finds.
func TestLimitHere(t *testing.T) {
	cpus, ok, err := Limit()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("limit %v CPUs, set %v", cpus, ok)
}

// readLimitFiles reads dir's limit, v1's files or v2's.
func readLimitFiles(dir string) (float64, bool, string, error) {
	if cpus, ok, err := readV1(dir); ok || err != nil {
		return cpus, ok, "v1", err
	}
	cpus, ok, err := readV2(dir)
	return cpus, ok, "v2", err
}

func TestThrottling(t *testing.T) {
	root := faketree.New(t, map[string]string{
		"v1/cpu.stat":  "nr_periods 120\nnr_throttled 7\nthrottled_time 123456789\n",
		"v2/cpu.stat":  "usage_usec 99\nuser_usec 50\nsystem_usec 49\nnr_periods 30\nnr_throttled 2\nthrottled_usec 1000\n",
		"bad/cpu.stat": "nr_periods many\nnr_throttled 2\n",
		"few/cpu.stat": "usage_usec 99\n",
	})
	for _, tt := range []struct {
		dir                string
		periods, throttled int64
	}{{"v1", 120, 7}, {"v2", 30, 2}} {
		p, th, err := Throttling(filepath.Join(root, tt.dir, "cpu.stat"))
		if err != nil || p != tt.periods || th != tt.throttled {
			t.Errorf("%s: got %d periods, %d throttled, %v; want %d, %d", tt.dir, p, th, err, tt.periods, tt.throttled)
		}
	}
	for _, dir := range []string{"bad", "few", "none"} {
		if _, _, err := Throttling(filepath.Join(root, dir, "cpu.stat")); err == nil {
			t.Errorf("%s: got no error", dir)
		}
	}
}

func TestGroupCPU(t *testing.T) {
	// cgroup v2: usage_usec in cpu.stat.
	v2 := faketree.New(t, map[string]string{"g/cpu.stat": "usage_usec 1500000\nuser_usec 1000000\nnr_periods 10\nnr_throttled 2\n"})
	if cpu, ok := GroupCPU(filepath.Join(v2, "g/cpu.stat")); !ok || cpu != 1500*time.Millisecond {
		t.Errorf("v2: got %v, %v; want 1.5s, true", cpu, ok)
	}
	// cgroup v1 with cpuacct mounted with cpu: cpuacct.usage, in ns.
	v1 := faketree.New(t, map[string]string{"g/cpu.stat": "nr_periods 10\nnr_throttled 2\n", "g/cpuacct.usage": "2500000000\n"})
	if cpu, ok := GroupCPU(filepath.Join(v1, "g/cpu.stat")); !ok || cpu != 2500*time.Millisecond {
		t.Errorf("v1 with cpuacct: got %v, %v; want 2.5s, true", cpu, ok)
	}
	// cgroup v1 without it: the processes in cgroup.procs, from /proc;
	// this test's process has used some CPU, and a pid that is gone adds
	// nothing.
	procs := faketree.New(t, map[string]string{"g/cpu.stat": "nr_periods 10\nnr_throttled 2\n", "g/cgroup.procs": fmt.Sprintf("%d\n999999999\n", os.Getpid())})
	for start := time.Now(); time.Since(start) < 30*time.Millisecond; {
	}
	if cpu, ok := GroupCPU(filepath.Join(procs, "g/cpu.stat")); !ok || cpu <= 0 {
		t.Errorf("v1 from /proc: got %v, %v; want this process's CPU, true", cpu, ok)
	}
	// GroupCPUUpTo sums at most so many processes; the cgroup's own
	// figure it reads whatever their number.
	if _, ok := GroupCPUUpTo(filepath.Join(procs, "g/cpu.stat"), 1); ok {
		t.Error("v1 from /proc, two processes, at most one: got ok, want false")
	}
	if cpu, ok := GroupCPUUpTo(filepath.Join(procs, "g/cpu.stat"), 2); !ok || cpu <= 0 {
		t.Errorf("v1 from /proc, two processes, at most two: got %v, %v; want this process's CPU, true", cpu, ok)
	}
	if cpu, ok := GroupCPUUpTo(filepath.Join(v1, "g/cpu.stat"), 0); !ok || cpu != 2500*time.Millisecond {
		t.Errorf("v1 with cpuacct, at most 0 processes: got %v, %v; want 2.5s, true", cpu, ok)
	}
	// Nothing to read.
	if _, ok := GroupCPU(filepath.Join(t.TempDir(), "cpu.stat")); ok {
		t.Error("no files: got ok, want false")
	}
}
