package priority

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// helperEnv makes the test binary act as a child (`cpusched lab-child
// priority`): TestMain runs the child from the arguments after "--".
const helperEnv = "PRIORITY_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(helperChild())
	}
	goleak.VerifyTestMain(m)
}

func helperChild() int {
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	get := func(name string) string {
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-"+name {
				return args[i+1]
			}
		}
		return ""
	}
	loops, _ := strconv.ParseUint(get("loops"), 10, 64)
	sleeps, _ := strconv.Atoi(get("sleeps"))
	unpriv := false
	for _, a := range args {
		unpriv = unpriv || a == "-unprivileged"
	}
	var err error
	if get("mode") == "tasks" {
		err = fmt.Errorf("tasks mode is not used by these tests")
	} else {
		err = ChildOS(context.Background(), os.Stdin, os.Stdout, get("mode"), get("policy"), loops, sleeps, unpriv)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func helperCommand(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	return cmd
}

// fakeCalls records calls and fails those listed in deny with err.
type fakeCalls struct {
	log  []string
	deny map[string]error
}

func (f *fakeCalls) calls() osCalls {
	return osCalls{
		setNice: func(tid, nice int) error {
			k := fmt.Sprintf("nice %d", nice)
			f.log = append(f.log, k)
			return f.deny[k]
		},
		setPolicy: func(tid int, policy, priority uint32) error {
			k := fmt.Sprintf("policy %d/%d", policy, priority)
			f.log = append(f.log, k)
			return f.deny[k]
		},
	}
}

func TestApplyPolicy(t *testing.T) {
	eperm := map[string]error{"nice -20": syscall.EPERM, "policy 2/99": syscall.EPERM}
	tests := []struct {
		policy      string
		deny        map[string]error
		wantLabel   string
		wantSkipped string
		wantCalls   string
	}{
		{Normal, nil, "normal (nice 0)", "", ""},
		{Nice, nil, "nice -20", "", "nice -20"},
		{Batch, nil, "SCHED_BATCH", "", "policy 3/0"},
		{Idle, nil, "SCHED_IDLE", "", "policy 5/0"},
		{RR, nil, "SCHED_RR 99", "", "policy 2/99"},
		{Nice, eperm, "nice +19 (nice -20 needs CAP_SYS_NICE)", "", "nice -20,nice 19"},
		{RR, eperm, "", "SCHED_RR 99 needs CAP_SYS_NICE", "policy 2/99"},
		{RR, map[string]error{"policy 2/99": syscall.EACCES}, "", "SCHED_RR 99 needs CAP_SYS_NICE", "policy 2/99"},
		{Batch, map[string]error{"policy 3/0": syscall.EINVAL}, "", "SCHED_BATCH: invalid argument", "policy 3/0"},
		{Nice, map[string]error{"nice -20": syscall.EPERM, "nice 19": syscall.EINVAL}, "", "nice -20 needs CAP_SYS_NICE; nice +19: invalid argument", "nice -20,nice 19"},
		{"fifo", nil, "", `unknown policy "fifo" (valid: normal,nice-20,batch,idle,rr99)`, ""},
	}
	for _, tt := range tests {
		f := &fakeCalls{deny: tt.deny}
		label, skipped := applyPolicy(tt.policy, 1, f.calls())
		if label != tt.wantLabel || skipped != tt.wantSkipped || strings.Join(f.log, ",") != tt.wantCalls {
			t.Errorf("applyPolicy(%s): got %q, skipped %q, calls %q; want %q, skipped %q, calls %q",
				tt.policy, label, skipped, strings.Join(f.log, ","), tt.wantLabel, tt.wantSkipped, tt.wantCalls)
		}
	}
}

func TestDenyPrivileged(t *testing.T) {
	f := &fakeCalls{}
	c := denyPrivileged(f.calls())
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"nice -20", c.setNice(1, -20), syscall.EPERM},
		{"nice 19", c.setNice(1, 19), nil},
		{"rr", c.setPolicy(1, schedRR, 99), syscall.EPERM},
		{"batch", c.setPolicy(1, schedBatch, 0), nil},
		{"idle", c.setPolicy(1, schedIdle, 0), nil},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.want) && tt.err != tt.want {
			t.Errorf("denyPrivileged %s: got %v, want %v", tt.name, tt.err, tt.want)
		}
	}
	if got, want := strings.Join(f.log, ","), "nice 19,policy 3/0,policy 5/0"; got != want {
		t.Errorf("denyPrivileged passed through: got %q, want %q", got, want)
	}
}

func TestRank(t *testing.T) {
	tests := []struct {
		finish []time.Duration
		want   []int
	}{
		{[]time.Duration{3, 1, 2}, []int{3, 1, 2}},
		{[]time.Duration{5, 5, 1}, []int{2, 3, 1}},
		{nil, nil},
	}
	for _, tt := range tests {
		got := make([]int, len(tt.finish))
		rank(len(tt.finish), func(i int) time.Duration { return tt.finish[i] }, func(i, o int) { got[i] = o })
		if fmt.Sprint(got) != fmt.Sprint(tt.want) && len(tt.want) > 0 {
			t.Errorf("rank(%v): got %v, want %v", tt.finish, got, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := Config{Target: time.Second, Sleeps: 10, Policies: Policies(), Chunk: 1}
	tests := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"valid", func(*Config) {}, ""},
		{"no policies", func(c *Config) { c.Policies = nil }, "-policies: empty list"},
		{"bad policy", func(c *Config) { c.Policies = []string{"fifo"} }, `-policies: unknown policy "fifo"`},
		{"long target", func(c *Config) { c.Target = time.Minute }, "-target: 1m0s out of range"},
		{"long target ignored with loops", func(c *Config) { c.Target, c.Loops = time.Minute, 5 }, ""},
		{"negative sleeps", func(c *Config) { c.Sleeps = -1 }, "-sleeps: -1 out of range"},
		{"zero chunk", func(c *Config) { c.Chunk = 0 }, "-chunk: must be at least 1"},
	}
	for _, tt := range tests {
		c := ok
		tt.change(&c)
		err := c.Validate()
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestSpinAndCalibrate(t *testing.T) {
	a, c := uint64(6364136223846793005), uint64(1442695040888963407)
	if got, want := Spin(2, 0), c*a+c; got != want {
		t.Errorf("Spin(2, 0): got %d, want %d", got, want)
	}
	if n := Calibrate(time.Millisecond); n < 1000 {
		t.Errorf("Calibrate(1ms): got %d, want >= 1000", n)
	}
}

func TestRunTasksCounts(t *testing.T) {
	res, err := RunTasks(context.Background(), DefaultTasks, 200_000, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 3 {
		t.Fatalf("RunTasks: got %d rows, want 3", len(res.Rows))
	}
	var orders []int
	for i, r := range res.Rows {
		if r.Name != DefaultTasks[i].Name || r.CPU <= 0 || r.Wall <= 0 {
			t.Errorf("row %d: got %+v, want name %s and positive times", i, r, DefaultTasks[i].Name)
		}
		orders = append(orders, r.Order)
	}
	sort.Ints(orders)
	if fmt.Sprint(orders) != "[1 2 3]" {
		t.Errorf("orders: got %v, want a permutation of 1..3", orders)
	}
}

// TestRunOSChildren starts the real children (the test binary as helper)
// with tiny loops: as they are, and acting unprivileged, where SCHED_RR
// must be reported as skipped and nice -20 replaced by nice +19.
func TestRunOSChildren(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the OS rows need Linux")
	}
	for _, unpriv := range []bool{false, true} {
		cfg := Config{Loops: 1000, Sleeps: 2, Policies: Policies(), Chunk: 1, Unprivileged: unpriv, Command: helperCommand}
		for _, mode := range []string{"cpu", "sleep"} {
			rows, err := runOS(context.Background(), cfg, mode, cfg.Loops, time.Minute)
			if err != nil {
				t.Fatalf("runOS(%s, unprivileged %v): %v", mode, unpriv, err)
			}
			for _, r := range rows {
				privileged := os.Geteuid() == 0 && !unpriv
				switch {
				case r.Policy == RR && !privileged:
					if r.Skipped != "SCHED_RR 99 needs CAP_SYS_NICE" {
						t.Errorf("%s unprivileged rr99: got skipped %q, want %q", mode, r.Skipped, "SCHED_RR 99 needs CAP_SYS_NICE")
					}
				case r.Policy == Nice && !privileged:
					if !strings.HasPrefix(r.Label, "nice +19") {
						t.Errorf("%s unprivileged nice: got label %q, want nice +19", mode, r.Label)
					}
				case r.Skipped != "" || r.Order == 0 || r.Wall <= 0:
					t.Errorf("%s %s (unprivileged %v): got %+v, want a measured row", mode, r.Policy, unpriv, r)
				}
			}
		}
	}
}

func TestWriteTable(t *testing.T) {
	res := &Result{CPUs: 2, GoVersion: "go1.x", Loops: 1000, Alone: 2 * time.Second, Sleeps: 10, Chunk: 5,
		CPULoops:   []OSRow{{Policy: Normal, Label: "normal (nice 0)", Wall: time.Second, CPU: time.Second, Order: 1}, {Policy: RR, Skipped: "SCHED_RR 99 needs CAP_SYS_NICE"}},
		SleepLoops: []OSRow{{Policy: Normal, Label: "normal (nice 0)", Wall: time.Second, Order: 1}, {Policy: RR, Skipped: "SCHED_RR 99 needs CAP_SYS_NICE"}},
		Tasks:      &TasksResult{Rows: []TaskRow{{Name: "ClassRealtime", Wall: time.Second, CPU: time.Second, Share: 95, Order: 1}}},
	}
	var b bytes.Buffer
	if err := WriteTable(&b, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"skipped: SCHED_RR 99 needs CAP_SYS_NICE", "22.0 s (3rd)", "47-49 s", "1st (throttled to 95%)", "95%", "why it differs"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("WriteTable: got\n%s\nwant it to contain %q", b.String(), want)
		}
	}
}

func TestRunOSKillsUnfinished(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the OS rows need Linux")
	}
	cfg := Config{Policies: []string{Normal, Batch}, Chunk: 1, Command: helperCommand}
	start := time.Now()
	rows, err := runOS(context.Background(), cfg, "cpu", 1<<40, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if !r.Unfinished || r.Order != 0 || r.Wall != 200*time.Millisecond {
			t.Errorf("row %s: got %+v, want unfinished after 200ms", r.Policy, r)
		}
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("runOS with a 200ms limit: got %v, want it to kill the copies", d)
	}
}
