package cpuscope

import (
	"os"
	"testing"

	"github.com/cpusched/cpusched/internal/faketree"
)

// A 4-CPU machine: busy ticks (user+nice+system+irq+softirq+steal) 100,
// 200, 300 and 400; the first line sums them; guest times are inside user.
const stat4 = `cpu  900 10 90 4000 20 0 0 0 50 0
cpu0 80 0 20 1000 5 0 0 0 10 0
cpu1 150 10 30 1000 5 5 4 1 10 0
cpu2 270 0 30 1000 5 0 0 0 20 0
cpu3 390 0 10 1000 5 0 0 0 10 0
intr 123 4 5 6
ctxt 999
`

const ms10 = int64(1e7) // one USER_HZ tick, in ns

func TestRead(t *testing.T) {
	tests := []struct {
		name     string
		stat     string
		allowed  []int
		wantCPUs int
		wantBusy int64 // ticks
		wantOK   bool
	}{
		{"every CPU allowed", stat4, []int{0, 1, 2, 3}, 4, 1000, true},
		{"a cpuset of two", stat4, []int{1, 3}, 2, 600, true},
		{"one CPU", stat4, []int{2}, 1, 300, true},
		{"an offline CPU in the mask is not counted", stat4, []int{3, 7}, 1, 400, true},
		{"no mask: every CPU", stat4, nil, 4, 1000, true},
		{"numbers /proc/stat does not list (lxcfs): every CPU", stat4, []int{40, 41}, 4, 1000, true},
		{"no per-CPU lines", "cpu  1 2 3 4 5 6 7 8\nintr 1\n", []int{0}, 0, 0, false},
		{"a short line", "cpu  1 2 3\ncpu0 1 2 3\n", []int{0}, 0, 0, false},
		{"garbage", "cpu0 a b c d e f g h\n", []int{0}, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(faketree.New(t, map[string]string{"proc/stat": tt.stat}))
			s, ok := r.Read(tt.allowed)
			if ok != tt.wantOK || s.CPUs != tt.wantCPUs || s.Busy != tt.wantBusy*ms10 {
				t.Errorf("got CPUs %d, busy %d ticks, ok %v; want %d, %d, %v", s.CPUs, s.Busy/ms10, ok, tt.wantCPUs, tt.wantBusy, tt.wantOK)
			}
		})
	}
}

func TestReadSetTellsTheCPUsApart(t *testing.T) {
	r := New(faketree.New(t, map[string]string{"proc/stat": stat4}))
	a, _ := r.Read([]int{0, 1})
	b, _ := r.Read([]int{1, 0})
	c, _ := r.Read([]int{2, 3})
	d, _ := r.Read([]int{0, 1, 2})
	if a.Set != b.Set {
		t.Errorf("the same CPUs in another order: Sets %x and %x", a.Set, b.Set)
	}
	if a.Set == c.Set || a.Set == d.Set {
		t.Errorf("other CPUs, the same Set: %x, %x, %x", a.Set, c.Set, d.Set)
	}
}

func TestReadWithoutProc(t *testing.T) {
	r := New(t.TempDir())
	if s, ok := r.Read([]int{0}); ok {
		t.Errorf("got %+v, true from an empty root; want false", s)
	}
	if _, _, ok := r.ThreadWait(1); ok {
		t.Error("ThreadWait read a thread from an empty root")
	}
}

const pressure = "some avg10=1.00 avg60=2.00 avg300=3.00 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"

func TestStall(t *testing.T) {
	v1Mountinfo := "31 30 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n40 30 0:37 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
	v2Mountinfo := "25 30 0:23 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
	tests := []struct {
		name   string
		files  map[string]string
		wantOK bool
	}{
		{"cgroup v2, a cgroup of its own", map[string]string{
			"proc/self/cgroup":                     "0::/box\n",
			"proc/self/mountinfo":                  v2Mountinfo,
			"sys/fs/cgroup/box/cgroup.events":      "populated 1\n",
			"sys/fs/cgroup/box/cpu.pressure":       pressure,
			"sys/fs/cgroup/cpu.pressure":           "some avg10=0 avg60=0 avg300=0 total=1\n",
			"sys/fs/cgroup/box/cgroup.controllers": "cpu\n",
		}, true},
		{"cgroup v2's root: the whole machine's, not read", map[string]string{
			"proc/self/cgroup":           "0::/\n",
			"proc/self/mountinfo":        v2Mountinfo,
			"sys/fs/cgroup/cpu.pressure": pressure,
		}, false},
		{"cgroup v1, the v2 hierarchy's root beside it", map[string]string{
			"proc/self/cgroup":                   "1:cpu:/box\n0::/\n",
			"proc/self/mountinfo":                v1Mountinfo,
			"sys/fs/cgroup/unified/cpu.pressure": pressure,
		}, false},
		{"cgroup v1 alone", map[string]string{
			"proc/self/cgroup":    "1:cpu:/box\n",
			"proc/self/mountinfo": "31 30 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n",
		}, false},
		{"a kernel without pressure accounting", map[string]string{
			"proc/self/cgroup":                "0::/box\n",
			"proc/self/mountinfo":             v2Mountinfo,
			"sys/fs/cgroup/box/cgroup.events": "populated 1\n",
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.files["proc/stat"] = stat4
			r := New(faketree.New(t, tt.files))
			s, ok := r.Read(nil)
			if !ok {
				t.Fatal("Read failed")
			}
			want := int64(0)
			if tt.wantOK {
				want = 123456 * 1000
			}
			if s.StallOK != tt.wantOK || s.Stall != want {
				t.Errorf("got stall %d, %v; want %d, %v", s.Stall, s.StallOK, want, tt.wantOK)
			}
		})
	}
}

func TestThreadWait(t *testing.T) {
	tests := []struct {
		name         string
		schedstat    string
		stat         string
		wantDelay    int64
		wantRunnable bool
		wantOK       bool
	}{
		{"runnable", "5000 7000 12\n", "41 (worker) R 1 1 1 0 -1\n", 7000, true, true},
		{"asleep, a command with spaces and parentheses", "5000 8000 12\n", "41 (a (b) c) S 1 1 1 0 -1\n", 8000, false, true},
		{"no stat file", "5000 8000 12\n", "", 0, false, false},
		{"a short schedstat", "5000\n", "41 (w) R 1\n", 0, false, false},
		{"a stat without its command", "5000 8000 12\n", "41 w R 1\n", 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{"proc/self/task/41/schedstat": tt.schedstat}
			if tt.stat != "" {
				files["proc/self/task/41/stat"] = tt.stat
			}
			delay, runnable, ok := New(faketree.New(t, files)).ThreadWait(41)
			if delay != tt.wantDelay || runnable != tt.wantRunnable || ok != tt.wantOK {
				t.Errorf("got %d, %v, %v; want %d, %v, %v", delay, runnable, ok, tt.wantDelay, tt.wantRunnable, tt.wantOK)
			}
		})
	}
}

// TestThreadWaitHere reads the process's main thread, where there is a
// /proc.
func TestThreadWaitHere(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc")
	}
	if _, _, ok := New("/").ThreadWait(os.Getpid()); !ok {
		t.Error("cannot read the main thread's schedstat and stat")
	}
}
