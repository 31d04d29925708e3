package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fakeCPUs makes allowedCPUs return cpus (or err) until the test ends.
func fakeCPUs(t *testing.T, cpus []int, err error) {
	t.Helper()
	saved := allowedCPUs
	t.Cleanup(func() { allowedCPUs = saved })
	allowedCPUs = func() ([]int, error) { return cpus, err }
}

func TestCPUSetHalves(t *testing.T) {
	tests := []struct {
		cpus          []int
		server, other []int
		wantErr       string
	}{
		{[]int{0, 1}, []int{0}, []int{1}, ""},
		{[]int{0, 1, 2}, []int{0}, []int{1, 2}, ""},
		{[]int{2, 3, 6, 7}, []int{2, 3}, []int{6, 7}, ""},
		{[]int{5}, nil, nil, "needs at least 2 CPUs to split, this process may use 1 (CPU 5)"},
	}
	for _, tt := range tests {
		fakeCPUs(t, tt.cpus, nil)
		server, other, err := CPUSetHalves()
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("CPUSetHalves on %v: got error %v, want %q", tt.cpus, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(server, tt.server) || !slices.Equal(other, tt.other) {
			t.Errorf("CPUSetHalves on %v: got %v, %v (%v); want %v, %v", tt.cpus, server, other, err, tt.server, tt.other)
		}
		// The servers' half cannot grow into the others' by an append.
		if grown := append(server, 99); len(grown) > 0 && other[0] == 99 {
			t.Errorf("CPUSetHalves on %v: the servers' half shares its array with the others'", tt.cpus)
		}
	}
	fakeCPUs(t, nil, errors.New("needs Linux's sched_setaffinity (this is plan9)"))
	if _, _, err := CPUSetHalves(); err == nil || !strings.Contains(err.Error(), "plan9") {
		t.Errorf("CPUSetHalves without affinity: got %v, want the reason", err)
	}
}

// TestValidateShape: -cpuset and -server-procs, and -cpu-quota under
// -cpuset: bad values name the field, its flag and the valid range.
func TestValidateShape(t *testing.T) {
	n := strconv.Itoa(runtime.NumCPU())
	tests := []struct {
		name    string
		cpus    []int // what the process may use
		edit    func(*Config)
		wantErr string
	}{
		{"server-procs 1", []int{0, 1}, func(c *Config) { c.ServerProcs = 1 }, ""},
		{"server-procs every CPU", []int{0, 1}, func(c *Config) { c.ServerProcs = runtime.NumCPU() }, ""},
		{"server-procs negative", []int{0, 1}, func(c *Config) { c.ServerProcs = -1 },
			"bench: ServerProcs (-server-procs) must be 0 (the runtime's default) or in 1.." + n + ", got -1"},
		{"server-procs above the CPUs", []int{0, 1}, func(c *Config) { c.ServerProcs = runtime.NumCPU() + 1 },
			"bench: ServerProcs (-server-procs) must be 0 (the runtime's default) or in 1.." + n + ", got " + strconv.Itoa(runtime.NumCPU()+1)},
		{"cpuset", []int{0, 1}, func(c *Config) { c.CPUSet = true }, ""},
		{"cpuset on 1 CPU", []int{3}, func(c *Config) { c.CPUSet = true },
			"bench: CPUSet (-cpuset): needs at least 2 CPUs to split, this process may use 1 (CPU 3)"},
		{"cpuset, server-procs its half", []int{0, 1, 2, 3}, func(c *Config) { c.CPUSet, c.ServerProcs = true, 2 }, ""},
		{"cpuset, server-procs above its half", []int{0, 1, 2, 3}, func(c *Config) { c.CPUSet, c.ServerProcs = true, 3 },
			"bench: ServerProcs (-server-procs) must be 0 (the runtime's default) or in 1..2 (the servers' CPUs under -cpuset), got 3"},
		{"cpuset, quota its half", []int{0, 1, 2, 3}, func(c *Config) { c.CPUSet, c.CPUQuota = true, 2 }, ""},
		{"cpuset, quota above its half", []int{0, 1, 2, 3}, func(c *Config) { c.CPUSet, c.CPUQuota = true, 2.5 },
			"bench: CPUQuota (-cpu-quota) must be 0 (no quota) or in 0.1..2 CPUs (the servers' CPUs under -cpuset), got 2.5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeCPUs(t, tt.cpus, nil)
			cfg := DefaultConfig("cpusched", "serve")
			tt.edit(&cfg)
			err := cfg.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Errorf("got error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestShapeName(t *testing.T) {
	tests := []struct {
		edit func(*Config)
		want string
	}{
		{func(*Config) {}, ShapeMachine},
		{func(c *Config) { c.CPUSet = true }, "cpuset"},
		{func(c *Config) { c.ServerProcs = 1 }, "server-procs"},
		{func(c *Config) { c.CPUQuota = 1 }, "cpu-quota"},
		{func(c *Config) { c.Cgroups, c.ServerProcs, c.CPUSet = true, 1, true }, "cpuset+server-procs+cgroups"},
	}
	for _, tt := range tests {
		var c Config
		tt.edit(&c)
		if got := shapeName(c); got != tt.want {
			t.Errorf("shapeName(%+v): got %q, want %q", c, got, tt.want)
		}
	}
}

func TestFormatAndParseCPUs(t *testing.T) {
	for _, tt := range []struct {
		cpus []int
		list string
	}{
		{nil, ""},
		{[]int{0}, "0"},
		{[]int{0, 1}, "0-1"},
		{[]int{0, 2, 3, 4, 7}, "0,2-4,7"},
	} {
		if got := FormatCPUs(tt.cpus); got != tt.list {
			t.Errorf("FormatCPUs(%v): got %q, want %q", tt.cpus, got, tt.list)
		}
		if tt.list == "" {
			continue
		}
		if got, err := parseCPUs(tt.list + "\n"); err != nil || !slices.Equal(got, tt.cpus) {
			t.Errorf("parseCPUs(%q): got %v (%v), want %v", tt.list, got, err, tt.cpus)
		}
	}
	for _, bad := range []string{"", "a", "3-1", "1-", "-1", "0,,1"} {
		if got, err := parseCPUs(bad); err == nil {
			t.Errorf("parseCPUs(%q): got %v, want an error", bad, got)
		}
	}
}

// TestShapePlace: the servers and the floor's hog get the servers' CPUs
// and GOMAXPROCS, the neighbour the others' CPUs and bench's environment.
func TestShapePlace(t *testing.T) {
	s := shape{serverCPUs: []int{0}, otherCPUs: []int{1}, serverProcs: 1}
	srv, nb := s.place(serverRole, nil), s.place(neighborRole, nil)
	if !slices.Equal(srv.cpus, []int{0}) || !slices.Equal(srv.env, []string{"GOMAXPROCS=1"}) {
		t.Errorf("the servers' place: got %+v, want CPU 0 and GOMAXPROCS=1", srv)
	}
	if !slices.Equal(nb.cpus, []int{1}) || nb.env != nil {
		t.Errorf("the neighbour's place: got %+v, want CPU 1 and bench's environment", nb)
	}
	t.Setenv("GOMAXPROCS", "7")
	cmd := srv.command("cpusched", []string{"serve"})
	if env := cmd.Environ(); !slices.Contains(env, "GOMAXPROCS=1") || slices.Contains(env, "GOMAXPROCS=7") {
		t.Errorf("the server's environment has %q, want GOMAXPROCS=1 over bench's 7", env)
	}
	if cmd := nb.command("cpusched", []string{"neighbor"}); cmd.Env != nil {
		t.Errorf("the neighbour's environment: got %q, want bench's", cmd.Env)
	}
	if p := (shape{}).place(serverRole, nil); p.cpus != nil || p.env != nil || p.check(1, "init") != nil {
		t.Errorf("the whole machine's place: got %+v, want bench's CPUs and environment, and no check", p)
	}
}

// TestShapeReported: the header says the shape, the JSON has it in
// config.shape, and an ospriority mode in another shape than the whole
// machine has a line of its contended shares.
func TestShapeReported(t *testing.T) {
	contended := 0.5
	rows := []Result{
		{Mode: "ospriority", Step: StepIdle, Probe: &ProbeResult{RPS: 200, P99Ms: 2}, ContendedPct: new(0.0)},
		{Mode: "ospriority", Step: StepNeighbor, Probe: &ProbeResult{RPS: 200, P99Ms: 3}, ContendedPct: &contended},
	}
	tests := []struct {
		cfg            Config
		shape          shape
		wantLine, json string
		wantContended  bool
	}{
		{DefaultConfig("x"), shape{}, "shape:   machine: the servers, the floor's hog, bench (the load generator) and the neighbour share every CPU", `"shape":{"name":"machine"}`, false},
		{Config{CPUSet: true, NeighborConcurrency: 1}, shape{serverCPUs: []int{0}, otherCPUs: []int{1}},
			"shape:   cpuset: the servers and the floor's hog on CPU 0, bench (the load generator) and the neighbour on CPU 1 (sched_setaffinity, -cpuset)",
			`"shape":{"name":"cpuset","server_cpus":"0","other_cpus":"1"}`, true},
		{Config{ServerProcs: 1, NeighborConcurrency: 1}, shape{serverProcs: 1},
			"shape:   server-procs: the servers and the floor's hog at GOMAXPROCS=1 of 2 CPUs, a neighbour of 1 thread (-server-procs",
			`"shape":{"name":"server-procs","server_procs":1}`, true},
		{Config{CPUQuota: 1}, shape{}, "shape:   cpu-quota: every server and the floor's hog under a CPU quota (quota: below)", `"shape":{"name":"cpu-quota"}`, true},
	}
	for _, tt := range tests {
		rep := &Report{Machine: Machine{CPUs: 2}, Config: reportConfig(tt.cfg), Results: rows}
		rep.Config.Modes = []string{"ospriority"}
		rep.Config.Shape = tt.shape.report(tt.cfg)
		var table, doc bytes.Buffer
		if err := rep.WriteTable(&table); err != nil {
			t.Fatal(err)
		}
		if err := json.NewEncoder(&doc).Encode(rep); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(table.String(), tt.wantLine) {
			t.Errorf("%s: the header has no %q:\n%s", rep.Config.Shape.Name, tt.wantLine, table.String())
		}
		if !strings.Contains(doc.String(), tt.json) {
			t.Errorf("%s: the JSON has no %s:\n%s", rep.Config.Shape.Name, tt.json, doc.String())
		}
		const line = "ospriority: contended (task threads kept at normal priority, others busy on their CPUs) for idle 0%, neighbor 0.5% of the step"
		if got := strings.Contains(table.String(), line); got != tt.wantContended {
			t.Errorf("%s: got the contended line %v, want %v:\n%s", rep.Config.Shape.Name, got, tt.wantContended, table.String())
		}
	}
}
