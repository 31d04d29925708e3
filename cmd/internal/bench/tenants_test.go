package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTenantShares: each group's owed share, its share of the work and
// the ratio of the two, for work as the weights say, off them, and none.
func TestTenantShares(t *testing.T) {
	tests := []struct {
		name      string
		weights   []int
		work      []float64
		wantOwed  []float64
		wantShare []float64 // nil: no shares
		wantRatio []float64
	}{
		{"as the weights", []int{300, 100, 100, 25}, []float64{3000, 1000, 1000, 250},
			[]float64{300.0 / 525, 100.0 / 525, 100.0 / 525, 25.0 / 525},
			[]float64{300.0 / 525, 100.0 / 525, 100.0 / 525, 25.0 / 525}, []float64{1, 1, 1, 1}},
		{"equal work, unequal weights", []int{300, 100}, []float64{50, 50},
			[]float64{0.75, 0.25}, []float64{0.5, 0.5}, []float64{0.5 / 0.75, 2}},
		{"one group starved", []int{100, 100}, []float64{10, 0},
			[]float64{0.5, 0.5}, []float64{1, 0}, []float64{2, 0}},
		{"no work at all", []int{100, 100}, []float64{0, 0},
			[]float64{0.5, 0.5}, nil, nil},
		{"a weight that is not positive", []int{100, 0}, []float64{1, 1},
			[]float64{0, 0}, nil, nil},
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	for _, tt := range tests {
		owed, share, ratio := tenantShares(tt.weights, tt.work)
		for i := range tt.weights {
			if !near(owed[i], tt.wantOwed[i]) {
				t.Errorf("%s: group %d owed: got %v, want %v", tt.name, i, owed[i], tt.wantOwed[i])
			}
			switch {
			case tt.wantShare == nil && (share[i] != nil || ratio[i] != nil):
				t.Errorf("%s: group %d: got share %v ratio %v, want none", tt.name, i, deref(share[i]), deref(ratio[i]))
			case tt.wantShare != nil && (share[i] == nil || ratio[i] == nil):
				t.Errorf("%s: group %d: got no share, want %v (ratio %v)", tt.name, i, tt.wantShare[i], tt.wantRatio[i])
			case tt.wantShare != nil && (!near(*share[i], tt.wantShare[i]) || !near(*ratio[i], tt.wantRatio[i])):
				t.Errorf("%s: group %d: got share %v ratio %v, want %v and %v", tt.name, i, *share[i], *ratio[i], tt.wantShare[i], tt.wantRatio[i])
			}
		}
	}
}

func deref(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

// TestSetTenantWeights: -tenant-weights, good and bad.
func TestSetTenantWeights(t *testing.T) {
	tests := []struct {
		list, want, wantErr string
	}{
		{list: "300:100:100:25", want: "300:100:100:25"},
		{list: "1:10000:5:5", want: "1:10000:5:5"},
		{list: "300:100:100", wantErr: "want 4 weights joined by ':' (one per group: 300:100:100:25), got 3"},
		{list: "300:100:100:0", wantErr: `weight "0" of group t4: want an integer in 1..10000`},
		{list: "300:x:100:25", wantErr: `weight "x" of group t2`},
		{list: "300,100,100,25", wantErr: "got 1"},
	}
	for _, tt := range tests {
		tenants := DefaultTenants()
		err := SetTenantWeights(tenants, tt.list)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: got error %v, want one containing %q", tt.list, err, tt.wantErr)
			}
			if got := TenantWeights(tenants); got != TenantWeights(DefaultTenants()) {
				t.Errorf("%q: the weights became %s on an error, want them unchanged", tt.list, got)
			}
		case err != nil:
			t.Errorf("%q: got error %v", tt.list, err)
		case TenantWeights(tenants) != tt.want:
			t.Errorf("%q: got %s, want %s", tt.list, TenantWeights(tenants), tt.want)
		}
	}
}

// TestTenantsStepIsOptIn: no mode measures tenants unless -steps names
// it, every mode (the floor too) does then, and a -quick run of it alone
// gets the longest quick steps.
func TestTenantsStepIsOptIn(t *testing.T) {
	c := DefaultConfig("cpusched", "serve")
	for _, m := range AllModes() {
		if slices.Contains(c.stepsOf(m), StepTenants) {
			t.Errorf("%s: the default steps %v have %s, want it opt-in", m, c.stepsOf(m), StepTenants)
		}
	}
	if c.measuresTenants() {
		t.Error("measuresTenants: got true for the default steps")
	}
	c.Steps = []string{StepTenants}
	for _, m := range AllModes() {
		if got := c.stepsOf(m); !slices.Equal(got, []string{StepTenants}) {
			t.Errorf("%s with -steps tenants: got %v, want [tenants]", m, got)
		}
	}
	c.Steps = []string{StepIdle, StepTenants}
	if got := c.stepsOf(ModeFloor); !slices.Equal(got, []string{StepIdle, StepTenants}) {
		t.Errorf("floor with -steps idle,tenants: got %v, want idle then tenants", got)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if got := QuickStep(nil, []string{StepTenants}); got != 2*time.Second {
		t.Errorf("QuickStep of tenants alone: got %v, want 2s", got)
	}
}

// TestValidateTenants: bad groups are refused only where the step runs,
// each with the field and the range.
func TestValidateTenants(t *testing.T) {
	tests := []struct {
		change  func([]Tenant) []Tenant
		wantErr string
	}{
		{func(ts []Tenant) []Tenant { return ts[:1] }, "Tenants: want 2..16 groups, got 1"},
		{func(ts []Tenant) []Tenant { ts[1].Name = ts[0].Name; return ts }, `group "t1" given twice`},
		{func(ts []Tenant) []Tenant { ts[0].Clients = 0; return ts }, `group "t1": Clients must be in 1..100, got 0`},
		{func(ts []Tenant) []Tenant { ts[2].CallPct = 101; return ts }, `group "t3": CallPct must be in 0..100, got 101`},
		{func(ts []Tenant) []Tenant { ts[3].Weight = 10001; return ts }, `group "t4": the weight must be in 1..10000, got 10001`},
		{func(ts []Tenant) []Tenant { ts[3].Name = "a,b"; return ts }, "without ',' or '='"},
	}
	for _, tt := range tests {
		c := DefaultConfig("cpusched", "serve")
		c.Tenants = tt.change(DefaultTenants())
		if err := c.Validate(); err != nil {
			t.Errorf("without the step: got %v, want the groups left unchecked", err)
		}
		c.Steps = []string{StepTenants}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("got %v, want an error containing %q", err, tt.wantErr)
		}
	}
}

// TestTenantCgroupsFake: the floor's groups' cgroups on a fake mount of
// each version: a parent at the default weight until lowerParent, a
// cgroup per group with its weight, and nothing left after
// removeCgroups.
func TestTenantCgroupsFake(t *testing.T) {
	for _, tt := range []struct {
		v2                           bool
		file, parentBefore, children string
		parentAfter                  string
	}{
		{v2: false, file: "cpu.shares", parentBefore: "1024\n", children: "3072:1024:1024:256", parentAfter: "10"},
		{v2: true, file: "cpu.weight", parentBefore: "100\n", children: "300:100:100:25", parentAfter: "1"},
	} {
		t.Run(map[bool]string{false: "v1", true: "v2"}[tt.v2], func(t *testing.T) {
			fs, err := findCgroupFS(fakeCgroupMount(t, tt.v2))
			if err != nil {
				t.Fatal(err)
			}
			fakeKernel(t, fs)
			before := dirNames(t, fs.dir)
			r := &tenantRun{plan: &tenantPlan{tenants: DefaultTenants()}}
			if err := r.makeCgroups(fs); err != nil {
				t.Fatal(err)
			}
			read := func(dir, file string) string {
				t.Helper()
				data, err := os.ReadFile(filepath.Join(dir, file))
				if err != nil {
					t.Fatal(err)
				}
				return string(data)
			}
			if got := read(r.parent.dir, tt.file); got != tt.parentBefore {
				t.Errorf("the parent's %s before lowerParent: got %q, want the default %q", tt.file, got, tt.parentBefore)
			}
			if tt.v2 && read(r.parent.dir, "cgroup.subtree_control") != "+cpu" {
				t.Errorf("the parent's cgroup.subtree_control: got %q, want +cpu", read(r.parent.dir, "cgroup.subtree_control"))
			}
			var weights []string
			for _, g := range r.cgroups {
				if filepath.Dir(g.dir) != r.parent.dir {
					t.Errorf("group cgroup %s: want it in %s", g.dir, r.parent.dir)
				}
				weights = append(weights, read(g.dir, tt.file))
			}
			if got := strings.Join(weights, ":"); got != tt.children {
				t.Errorf("the groups' %s: got %s, want %s", tt.file, got, tt.children)
			}
			if !strings.Contains(r.weighted, tt.file+" "+tt.children+", in one of "+tt.file+" "+tt.parentAfter) {
				t.Errorf("weighted: got %q, want the groups' and the parent's %s", r.weighted, tt.file)
			}
			if err := r.lowerParent(); err != nil {
				t.Fatal(err)
			}
			if got := read(r.parent.dir, tt.file); got != tt.parentAfter {
				t.Errorf("the parent's %s after lowerParent: got %q, want %q", tt.file, got, tt.parentAfter)
			}
			if err := r.removeCgroups(); err != nil {
				t.Fatal(err)
			}
			if after := dirNames(t, fs.dir); !slices.Equal(after, before) {
				t.Errorf("after removeCgroups: got %v, want %v", after, before)
			}
		})
	}
}

// TestTenantCgroupsOnThisMachine: on the real cgroup mount (root only),
// the groups' cgroups are made with their weights, a process moved into
// one runs there, and every cgroup is gone once it has exited and they
// are removed.
func TestTenantCgroupsOnThisMachine(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make cgroups")
	}
	fs, err := openCgroups(0, "the test")
	if err != nil {
		t.Skipf("no writable cgroup with a cpu controller here: %v", err)
	}
	r := &tenantRun{plan: &tenantPlan{tenants: DefaultTenants()}}
	defer r.removeCgroups()
	if err := r.makeCgroups(fs); err != nil {
		t.Fatal(err)
	}
	if err := r.lowerParent(); err != nil {
		t.Fatal(err)
	}
	made := append([]string{r.parent.dir}, dirsOf(r.cgroups)...)
	name, args := r.cgroups[2].inCgroup("cat", []string{"/proc/self/cgroup"})
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("a process in the group's cgroup: %v: %s", err, out)
	}
	if want := strings.TrimPrefix(r.cgroups[2].dir, fs.dir); !strings.Contains(string(out), want+"\n") {
		t.Errorf("the process's cgroups:\n%s\nwant %s among them", out, want)
	}
	file, want := fs.weightFile(tenantsParentWeight)
	if got, err := os.ReadFile(filepath.Join(r.parent.dir, file)); err != nil || strings.TrimSpace(string(got)) != want {
		t.Errorf("the parent's %s: got %q (%v), want %s", file, got, err, want)
	}
	if err := r.removeCgroups(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range made {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after removeCgroups: got %v, want it gone", dir, err)
		}
	}
}

func dirsOf(gs []*cpuCgroup) []string {
	var dirs []string
	for _, g := range gs {
		dirs = append(dirs, g.dir)
	}
	return dirs
}

// ourCgroups returns the cgroups this process has made and not removed,
// at the top of the real cgroup mount's cpu hierarchy; nil where there is
// none.
func ourCgroups(t *testing.T) []string {
	t.Helper()
	fs, err := findCgroupFS(cgroupMount)
	if err != nil {
		return nil
	}
	var ours []string
	prefix := fmt.Sprintf("%s%d-", cgroupNamePrefix, os.Getpid())
	for _, name := range dirNames(t, fs.dir) {
		if strings.HasPrefix(name, prefix) {
			ours = append(ours, name)
		}
	}
	return ours
}

// tenantsConfig returns a short run of the tenants step alone in the floor
// and mode, with small tasks (a pass taken for 100 us).
func tenantsConfig(t *testing.T, mode string) Config {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the demo server; skipped with -short")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	prev := measurePass
	measurePass = func() time.Duration { return 100 * time.Microsecond }
	t.Cleanup(func() { measurePass = prev })
	cfg := DefaultConfig(cpuschedBin, "serve")
	cfg.Modes, cfg.Steps = []string{ModeFloor, mode}, []string{StepTenants}
	cfg.Step, cfg.Warmup, cfg.Settle = 600*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	cfg.ProbeRate = 100
	for i := range cfg.Tenants {
		cfg.Tenants[i].Clients = 2
	}
	return cfg
}

// TestRunTenants runs the tenants step in the floor and the last mode:
// each row has the probe and every group's figures, the mode's shares
// sum to 1, the floor's have shares where cgroups can be made and say why
// not where they cannot, the table and the JSON carry them, and no cgroup
// or process is left.
func TestRunTenants(t *testing.T) {
	mode := AllModes()[len(AllModes())-1]
	for _, withCgroups := range []bool{true, false} {
		t.Run(map[bool]string{true: "cgroups where they can be made", false: "no cgroups"}[withCgroups], func(t *testing.T) {
			cfg := tenantsConfig(t, mode)
			if !withCgroups {
				prev := openTenantCgroups
				openTenantCgroups = func() (*cgroupFS, error) { return nil, errors.New("cgroups refused by the test") }
				t.Cleanup(func() { openTenantCgroups = prev })
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			rep, err := Run(ctx, cfg)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if len(rep.Skipped) > 0 {
				t.Fatalf("skipped %+v: this test wants a machine where SCHED_IDLE can be set", rep.Skipped)
			}
			if len(rep.Results) != 2 || rep.Config.Tenants == nil || len(rep.Config.Tenants.Groups) != 4 {
				t.Fatalf("got %d rows, config tenants %+v; want the floor's and %s's tenants rows and the groups", len(rep.Results), rep.Config.Tenants, mode)
			}
			_, cgErr := openCgroups(0, "the test")
			wantFloorShares := withCgroups && os.Geteuid() == 0 && cgErr == nil
			for _, row := range rep.Results {
				want := row.Mode != ModeFloor || wantFloorShares
				if row.Mode == ModeFloor && want && !floorGotCPU(row) {
					// A machine busy enough starves the SCHED_IDLE processes
					// of the least-weighted cgroup for the whole short window:
					// no CPU, so no shares, which the table then warns of.
					t.Logf("the floor's groups got no CPU in the window: no shares to check")
					want = false
				}
				checkTenantsRow(t, row, want)
			}
			if f := rep.Results[0].Tenants; !wantFloorShares && !strings.Contains(f.NoShares, map[bool]string{false: "cgroups refused by the test", true: ""}[withCgroups]) {
				t.Errorf("floor: no_shares %q, want why", f.NoShares)
			}
			if v := rep.Results[1].VsFloor; v == nil || v.Step != StepTenants {
				t.Errorf("%s/tenants: got vs_floor %+v, want the floor's tenants", mode, v)
			}
			var table, js bytes.Buffer
			if err := rep.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			wantLine := "floor: a SCHED_IDLE process per group, each in a cgroup of"
			if !wantFloorShares {
				wantLine = "floor: no shares: the groups' processes could not be weighted:"
			}
			for _, want := range []string{"share/weight", wantLine, "tenants: weights 300:100:100:25"} {
				if !strings.Contains(table.String(), want) {
					t.Errorf("the table lacks %q:\n%s", want, table.String())
				}
			}
			if err := rep.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{`"share_x"`, `"weight_share"`, `"share_of": "cpu_time"`, `"pass_us"`} {
				if !strings.Contains(js.String(), want) {
					t.Errorf("the JSON lacks %s", want)
				}
			}
			if left := ourCgroups(t); len(left) > 0 {
				t.Errorf("cgroups left behind: %v", left)
			}
			if pids := childrenRunning(t, cpuschedBin); len(pids) > 0 {
				t.Errorf("processes left behind: %v", pids)
			}
			t.Logf("\n%s", table.String())
		})
	}
}

// floorGotCPU reports whether the floor row's processes used any CPU in
// the window.
func floorGotCPU(row Result) bool {
	if row.Tenants == nil {
		return false
	}
	for _, g := range row.Tenants.Groups {
		if g.CPUTimeMs != nil && *g.CPUTimeMs > 0 {
			return true
		}
	}
	return false
}

// checkTenantsRow checks a tenants row: the probe answered, every group
// there, with shares summing to 1 where wantShares.
func checkTenantsRow(t *testing.T, row Result, wantShares bool) {
	t.Helper()
	name := row.Mode + "/" + row.Step
	tr := row.Tenants
	if row.Step != StepTenants || row.Probe == nil || row.Probe.RPS <= 0 || tr == nil || len(tr.Groups) != 4 || !(tr.WindowS > 0) {
		t.Fatalf("%s: got probe %+v, tenants %+v; want the probe answered and 4 groups", name, row.Probe, tr)
	}
	sum := 0.0
	for _, g := range tr.Groups {
		if (g.Share != nil) != wantShares || (g.ShareX != nil) != wantShares {
			t.Errorf("%s group %s: got share %v, ratio %v; want them: %v", name, g.Name, deref(g.Share), deref(g.ShareX), wantShares)
		}
		if g.Share != nil {
			sum += *g.Share
		}
		if row.Mode == ModeFloor {
			if g.CPUTimeMs == nil || g.PassesPerS != nil || g.Tasks != nil {
				t.Errorf("%s group %s: got cpu %v, passes/s %v, tasks %v; want its process's CPU time only", name, g.Name, deref(g.CPUTimeMs), g.PassesPerS, g.Tasks)
			}
			continue
		}
		if g.PassesPerS == nil || g.RunTimeMs == nil || g.Tasks == nil || g.Errors == nil || *g.Errors != 0 {
			t.Errorf("%s group %s: got passes/s %v, run time %v, tasks %v, errors %v; want them all, no error", name, g.Name, g.PassesPerS, g.RunTimeMs, g.Tasks, g.Errors)
		}
	}
	if wantShares && math.Abs(sum-1) > 1e-9 {
		t.Errorf("%s: the shares sum to %v, want 1", name, sum)
	}
}

// TestRunTenantsCancelled: Ctrl-C in the floor's tenants step stops its
// processes and removes their cgroups.
func TestRunTenantsCancelled(t *testing.T) {
	cfg := tenantsConfig(t, AllModes()[len(AllModes())-1])
	cfg.Step = 10 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := Run(ctx, cfg)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got error %v, want context.DeadlineExceeded", err)
	}
	if left := ourCgroups(t); len(left) > 0 {
		t.Errorf("cgroups left behind: %v", left)
	}
	if pids := childrenRunning(t, cpuschedBin); len(pids) > 0 {
		t.Errorf("processes left behind: %v", pids)
	}
}

// TestWriteTenants: the tenants table of a report has a line per group
// with the mode's probe on its first, the floor's weighting, and a
// warning where the floor's groups got almost no CPU.
func TestWriteTenants(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	groups := func(cpuMs float64) []TenantGroup {
		var gs []TenantGroup
		for _, tn := range DefaultTenants()[:2] {
			gs = append(gs, TenantGroup{Tenant: tn, WeightShare: 0.5, Share: f(0.5), ShareX: f(1), CPUTimeMs: f(cpuMs)})
		}
		return gs
	}
	for _, tt := range []struct {
		cpuMs float64
		warn  bool
	}{{1000, false}, {10, true}} {
		rep := &Report{
			Config: ReportConfig{Tenants: &ReportTenants{Groups: DefaultTenants()[:2], PassUs: 9, TaskPasses: [2]int{1, 2}, CallPasses: [2]int{3, 4}, PauseMs: 200}},
			Results: []Result{{Mode: ModeFloor, Step: StepTenants, Probe: &ProbeResult{P99Ms: 2},
				Tenants: &TenantsResult{WindowS: 7, Groups: groups(tt.cpuMs), Weighted: "a SCHED_IDLE process per group", ShareOf: "cpu_time"}}},
		}
		var buf bytes.Buffer
		if err := rep.WriteTable(&buf); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		for _, want := range []string{"floor: a SCHED_IDLE process per group\n", "share/weight", "t1", "t2", "1.00"} {
			if !strings.Contains(out, want) {
				t.Errorf("cpu %v ms: the table lacks %q:\n%s", tt.cpuMs, want, out)
			}
		}
		if got := strings.Contains(out, "their shares say little"); got != tt.warn {
			t.Errorf("cpu %v ms each over 7 s: got the warning %v, want %v:\n%s", tt.cpuMs, got, tt.warn, out)
		}
	}
}
