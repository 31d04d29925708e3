// The tenants step: groups of tasks with weights, sharing the server
// beside the probe, and each group's share of the CPU work against its
// weight.
//
// Each group (Tenant) has closed-loop clients that send one task after
// the other to /checksum?sched=1&group=NAME: work that yields (a random
// TenantTaskTime of passes, a Checkpoint after every pass) or, for
// CallPct per cent of the tasks, a call that cannot (a random
// TenantCallTime of passes with no Checkpoint, as a bcrypt). A bursty
// group's clients rest a random 0..TenantPause between tasks. The server
// is started with the groups' weights (serve -groups) and counts each
// group's passes; a group's share is its part of all the groups' passes
// over the window. Lengths are in passes, so that every mode runs the
// same work: Run times a pass once, in bench itself (measurePass).
//
// The floor runs the same work in separate processes, one per group
// (`cpusched idle-hog` with the group's jobs, hogproc.Jobs), every thread
// SCHED_IDLE as the floor's hog's, each in a cgroup whose CPU weight has
// the ratio of the group's weight (cpu.shares on cgroup v1, cpu.weight on
// v2): how the kernel shares the CPUs between containers. Where cgroups
// cannot be made (not root, no writable cpu controller, not Linux) the
// processes run in bench's cgroup, unweighted, and the floor's row says
// why it has no shares; under a CPU quota they share the server's quota
// cgroup, as the floor's hog does, and have no shares either. The
// processes and their cgroups live for the step alone: started before
// its warm-up, stopped and removed after its window, on an error and on
// Ctrl-C too.

package bench

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/cmd/internal/demo"
	"github.com/cpusched/cpusched/cmd/internal/hogproc"
)

// The tenants step's work and limits.
const (
	// TenantTaskTime and TenantCallTime bound the CPU time of a task
	// that yields and of a call that cannot, on this machine (Run times a
	// pass and converts): 25-50 ms of passes, a Checkpoint after each;
	// 50-100 ms in one go, as a bcrypt at a usual cost.
	MinTenantTaskTime = 25 * time.Millisecond
	MaxTenantTaskTime = 50 * time.Millisecond
	MinTenantCallTime = 50 * time.Millisecond
	MaxTenantCallTime = 100 * time.Millisecond
	// TenantPause is the longest rest of a bursty group's client between
	// two tasks.
	TenantPause = 200 * time.Millisecond
	// DefaultTenantClients is each default group's closed-loop clients:
	// with four groups, twelve tasks for the two CPUs of the project's
	// machine, so that every group always has one waiting.
	DefaultTenantClients = 3
	// MaxTenants and MaxTenantClients bound Config.Tenants.
	MaxTenants       = 16
	MaxTenantClients = 100
)

// Tenant is one group of the tenants step.
type Tenant struct {
	// Name is the group's name (cpusched.WithGroup), unique in the step,
	// without ',' or '=' (demo.CheckGroups).
	Name string `json:"name"`
	// Weight is the group's weight (cpusched.SetGroupWeight,
	// demo.MinGroupWeight..MaxGroupWeight); in the floor, its cgroup's
	// CPU weight on the same scale.
	Weight int `json:"weight"`
	// Clients is the group's closed-loop clients (1..MaxTenantClients).
	Clients int `json:"clients"`
	// CallPct is the per cent of its tasks (0..100) that are calls that
	// cannot yield (TenantCallTime, no Checkpoint); the others yield.
	CallPct int `json:"call_pct"`
	// Bursty makes its clients rest a random 0..TenantPause between tasks.
	Bursty bool `json:"bursty,omitempty"`
}

// DefaultTenants returns the groups of the tenants step: weights
// 300:100:100:25; half of t1's and t4's tasks and all of t3's are calls
// that cannot yield, t2's all yield and its clients are bursty.
func DefaultTenants() []Tenant {
	return []Tenant{
		{Name: "t1", Weight: 300, Clients: DefaultTenantClients, CallPct: 50},
		{Name: "t2", Weight: 100, Clients: DefaultTenantClients, Bursty: true},
		{Name: "t3", Weight: 100, Clients: DefaultTenantClients, CallPct: 100},
		{Name: "t4", Weight: 25, Clients: DefaultTenantClients, CallPct: 50},
	}
}

// TenantWeights returns the tenants' weights joined by ':', as
// bench -tenant-weights takes them: "300:100:100:25".
func TenantWeights(tenants []Tenant) string {
	var ws []string
	for _, t := range tenants {
		ws = append(ws, strconv.Itoa(t.Weight))
	}
	return strings.Join(ws, ":")
}

// SetTenantWeights gives tenants, in order, the weights of list
// ("300:100:100:25"): as many as there are tenants. Its error says what
// is wrong and the valid range, and leaves tenants unchanged.
func SetTenantWeights(tenants []Tenant, list string) error {
	items := strings.Split(list, ":")
	if len(items) != len(tenants) {
		return fmt.Errorf("want %d weights joined by ':' (one per group: %s), got %d in %q", len(tenants), TenantWeights(tenants), len(items), list)
	}
	weights := make([]int, len(items))
	for i, item := range items {
		w, err := strconv.Atoi(item)
		if err != nil || w < demo.MinGroupWeight || w > demo.MaxGroupWeight {
			return fmt.Errorf("weight %q of group %s: want an integer in %d..%d", item, tenants[i].Name, demo.MinGroupWeight, demo.MaxGroupWeight)
		}
		weights[i] = w
	}
	for i := range tenants {
		tenants[i].Weight = weights[i]
	}
	return nil
}

// validateTenants checks Config.Tenants where a mode measures the tenants
// step.
func (c Config) validateTenants() error {
	if !c.measuresTenants() {
		return nil
	}
	if n := len(c.Tenants); n < 2 || n > MaxTenants {
		return fmt.Errorf("bench: Tenants: want 2..%d groups, got %d", MaxTenants, n)
	}
	groups := map[string]int{}
	for _, t := range c.Tenants {
		if _, dup := groups[t.Name]; dup {
			return fmt.Errorf("bench: Tenants: group %q given twice", t.Name)
		}
		groups[t.Name] = t.Weight
		switch {
		case t.Clients < 1 || t.Clients > MaxTenantClients:
			return fmt.Errorf("bench: Tenants: group %q: Clients must be in 1..%d, got %d", t.Name, MaxTenantClients, t.Clients)
		case t.CallPct < 0 || t.CallPct > 100:
			return fmt.Errorf("bench: Tenants: group %q: CallPct must be in 0..100, got %d", t.Name, t.CallPct)
		}
	}
	if err := demo.CheckGroups(groups); err != nil {
		return fmt.Errorf("bench: Tenants (-tenant-weights): %w", err)
	}
	return nil
}

// measuresTenants reports whether a mode of the run measures the tenants
// step.
func (c Config) measuresTenants() bool {
	return slices.ContainsFunc(c.modes(), func(m string) bool { return slices.Contains(c.stepsOf(m), StepTenants) })
}

// tenantGroups returns the groups' weights by name, as demo.Config.Groups
// takes them.
func tenantGroups(tenants []Tenant) map[string]int {
	groups := make(map[string]int, len(tenants))
	for _, t := range tenants {
		groups[t.Name] = t.Weight
	}
	return groups
}

// tenantPlan is the tenants step of a run: its groups, their work in
// passes (the same in every mode), and where the floor's groups run.
type tenantPlan struct {
	tenants          []Tenant
	pass             time.Duration // one pass, as measurePass timed it
	minTask, maxTask int           // a task that yields
	minCall, maxCall int           // a call that cannot
	// cgroups is where the floor's groups get weighted cgroups; nil for
	// none, and noCgroups says why.
	cgroups   *cgroupFS
	noCgroups string
}

// newTenantPlan times a pass and sizes the work of cfg.Tenants by it, and
// finds where the floor's groups get weighted cgroups, if the floor
// measures the step: in cgroups (the mount -cgroups opened) or one opened
// for them; none under a CPU quota, where they share the server's, or
// where none can be made (the plan says why).
func newTenantPlan(cfg Config, cgroups *cgroupFS) *tenantPlan {
	pass := measurePass()
	passes := func(d time.Duration) int {
		return min(max(int(math.Round(float64(d)/float64(pass))), demo.MinPasses), demo.MaxPasses)
	}
	plan := &tenantPlan{
		pass: pass, tenants: slices.Clone(cfg.Tenants),
		minTask: passes(MinTenantTaskTime), maxTask: passes(MaxTenantTaskTime),
		minCall: passes(MinTenantCallTime), maxCall: passes(MaxTenantCallTime),
	}
	switch {
	case !slices.Contains(cfg.stepsOf(ModeFloor), StepTenants) || !slices.Contains(cfg.modes(), ModeFloor):
	case cfg.CPUQuota > 0:
		plan.noCgroups = "under -cpu-quota they share the server's quota cgroup, as the floor's hog does"
	case cgroups != nil:
		plan.cgroups = cgroups
	default:
		var err error
		if plan.cgroups, err = openTenantCgroups(); err != nil {
			plan.noCgroups = err.Error()
		}
	}
	return plan
}

// measurePass returns the CPU time of one of the demo's CRC32 passes here:
// the least of a few timings, the pass undisturbed. A variable, so that a
// test can fix it.
var measurePass = func() time.Duration {
	buf := make([]byte, demo.BufferSize)
	best := time.Duration(math.MaxInt64)
	var crc uint32
	for range 5 {
		start := time.Now()
		for range 20 {
			crc = crc32.Update(crc, crc32.IEEETable, buf)
		}
		best = min(best, time.Since(start)/20)
	}
	passSink.Store(crc)
	return max(best, time.Microsecond)
}

// passSink keeps measurePass's result live.
var passSink atomic.Uint32

// jobs returns the floor's process's jobs for tenant t.
func (plan *tenantPlan) jobs(t Tenant) hogproc.Jobs {
	j := hogproc.Jobs{MinPasses: plan.minTask, MaxPasses: plan.maxTask, CallPct: t.CallPct, MinCallPasses: plan.minCall, MaxCallPasses: plan.maxCall}
	if t.Bursty {
		j.Pause = TenantPause
	}
	return j
}

// openTenantCgroups finds where the floor's groups get cgroups of their
// own, as -cgroups does; its error says why they cannot. A variable, so
// that a test can take the path where they cannot on any machine.
var openTenantCgroups = func() (*cgroupFS, error) { return openCgroups(0, "the tenants step's weighted cgroups") }

// tenantRun is the tenants step's load while it runs: the clients of
// every group (the floor: a process per group, perhaps each in a
// weighted cgroup).
type tenantRun struct {
	plan *tenantPlan
	// counts are the clients' answered and failed tasks, per group.
	counts []tenantCounts
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// procs and cgroups are the floor's, per group, and parent the
	// cgroup that holds the groups' cgroups; cgroups nil where the groups
	// are not weighted (noShares says why).
	procs    []*hogproc.Process
	cgroups  []*cpuCgroup
	parent   *cpuCgroup
	weighted string
	noShares string
}

// tenantCounts are one group's clients' tasks.
type tenantCounts struct{ ok, failed atomic.Int64 }

// startTenantClients starts every group's closed-loop clients against the
// server at base, with client; stop ends them.
func startTenantClients(ctx context.Context, plan *tenantPlan, base string, client *http.Client) *tenantRun {
	ctx, cancel := context.WithCancel(ctx)
	r := &tenantRun{plan: plan, counts: make([]tenantCounts, len(plan.tenants)), cancel: cancel}
	for i, t := range plan.tenants {
		for range t.Clients {
			r.wg.Go(func() { r.client(ctx, base, client, t, &r.counts[i]) })
		}
	}
	return r
}

// client is one closed-loop client of group t: a task, then the next (a
// bursty group's after a rest), until ctx ends.
func (r *tenantRun) client(ctx context.Context, base string, client *http.Client, t Tenant, counts *tenantCounts) {
	w := r.plan
	for ctx.Err() == nil {
		q := url.Values{"sched": {"1"}, "group": {t.Name}}
		if rand.IntN(100) < t.CallPct {
			q.Set("n", strconv.Itoa(w.minCall+rand.IntN(w.maxCall-w.minCall+1)))
			q.Set("checkpoint", "0")
		} else {
			q.Set("n", strconv.Itoa(w.minTask+rand.IntN(w.maxTask-w.minTask+1)))
		}
		if err := tenantTask(ctx, client, base+"/checksum?"+q.Encode()); err == nil {
			counts.ok.Add(1)
		} else if ctx.Err() == nil {
			counts.failed.Add(1)
		}
		if t.Bursty {
			_ = sleepCtx(ctx, rand.N(TenantPause+1))
		}
	}
}

// tenantTask sends one task and reads its answer; an error for a failed
// request or a status other than 200.
func tenantTask(ctx context.Context, client *http.Client, u string) error {
	ctx, cancel := context.WithTimeout(ctx, hogTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %s", resp.Status)
	}
	return err
}

// startFloorTenants starts the floor's processes, one per group, each in
// a cgroup of the group's weight where work has a cgroup mount (else in
// quota, the server's quota cgroup, or bench's), as l starts the floor's
// hog, and sets them running. On failure what it started is stopped and
// removed.
func startFloorTenants(ctx context.Context, plan *tenantPlan, l *launcher, quota *cpuCgroup) (r *tenantRun, err error) {
	r = &tenantRun{plan: plan, noShares: plan.noCgroups}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.stop(context.WithoutCancel(ctx)))
			r = nil
		}
	}()
	if plan.cgroups != nil {
		if err := r.makeCgroups(plan.cgroups); err != nil {
			// Cgroups that cannot be made or weighted are no floor for the
			// shares; the probe's floor is still worth measuring.
			r.noShares = fmt.Sprintf("%s: %v", plan.cgroups, err)
			if err := r.removeCgroups(); err != nil {
				return r, err
			}
		}
	}
	for i, t := range plan.tenants {
		cg := quota
		if r.cgroups != nil {
			cg = r.cgroups[i]
		}
		args := append([]string{hogproc.Command, "-c", strconv.Itoa(t.Clients)}, plan.jobs(t).Args()...)
		p, err := startHogProcess(ctx, l, args, l.place(serverRole, cg))
		if err != nil {
			return r, fmt.Errorf("the floor's process of group %s: %w", t.Name, err)
		}
		r.procs = append(r.procs, p)
	}
	// Every command is answered before the parent's weight is lowered:
	// after it, on a busy machine, an answer may take long.
	for _, p := range r.procs {
		if _, err := p.Run(ctx); err != nil {
			return r, err
		}
	}
	return r, r.lowerParent()
}

// tenantsParentWeight is the weight of the cgroup that holds the floor's
// groups' cgroups once they run: the least (cpu.weight 1 on v2,
// cpu.shares 10 on v1), so that beside the server's threads the groups
// get what a SCHED_IDLE thread gets, as the floor's hog does. Siblings of
// the server instead, at their own weights, they took the CPU from it as
// peers do: a probe p99 of 40 ms in a trial on the project's 2-vCPU
// machine. It is set only once the processes have said hello
// (lowerParent): on a machine kept busy by others, a process that
// starts in such a cgroup may not get to say it within hogproc's 10 s.
const tenantsParentWeight = 1

// makeCgroups makes, in fs, the cgroup that holds the groups' cgroups,
// at the default weight until lowerParent, and in it one per group with
// the group's weight. On failure the caller removes what it made
// (removeCgroups).
func (r *tenantRun) makeCgroups(fs *cgroupFS) error {
	var err error
	if r.parent, err = fs.create(nextCgroupName(), 0); err != nil {
		return err
	}
	below, err := r.parent.sub()
	if err != nil {
		return err
	}
	var weights []string
	for _, t := range r.plan.tenants {
		g, err := below.createWeighted(nextCgroupName(), t.Weight)
		if err != nil {
			return err
		}
		r.cgroups = append(r.cgroups, g)
		_, value := fs.weightFile(t.Weight)
		weights = append(weights, value)
	}
	file, parentValue := fs.weightFile(tenantsParentWeight)
	r.weighted = fmt.Sprintf("a SCHED_IDLE process per group, each in a cgroup of %s %s, in one of %s %s (%s)",
		file, strings.Join(weights, ":"), file, parentValue, fs)
	return nil
}

// lowerParent gives the groups' parent cgroup tenantsParentWeight, if
// there is one; its processes must have been told to run first.
func (r *tenantRun) lowerParent() error { return r.setParentWeight(tenantsParentWeight) }

// setParentWeight gives the groups' parent cgroup weight, if there is
// one.
func (r *tenantRun) setParentWeight(weight int) error {
	if r.parent == nil {
		return nil
	}
	file, value := r.parent.fs.weightFile(weight)
	return writeCgroupFile(r.parent.dir, file, value)
}

// removeCgroups removes the floor's cgroups, the groups' and then their
// parent's, once their processes have exited, and forgets them.
func (r *tenantRun) removeCgroups() error {
	var errs []error
	for _, g := range r.cgroups {
		errs = append(errs, g.remove())
	}
	if r.parent != nil {
		errs = append(errs, r.parent.remove())
	}
	r.cgroups, r.parent, r.weighted = nil, nil, ""
	return errors.Join(errs...)
}

// stop ends the load: the clients, or the floor's processes (after it has
// checked that their threads are still all SCHED_IDLE) and then their
// cgroups. It returns the first problem.
func (r *tenantRun) stop(ctx context.Context) error {
	var errs []error
	if r.cancel != nil {
		r.cancel()
		r.wg.Wait()
	}
	// The processes exit once they see their stdin closed: at the least
	// weight, on a busy machine, they may not get to within hogproc's
	// grace.
	errs = append(errs, r.setParentWeight(cpusched.DefaultGroupWeight))
	for i, p := range r.procs {
		if ctx.Err() == nil {
			if _, err := hogproc.CheckThreads(p.PID()); err != nil {
				errs = append(errs, fmt.Errorf("the floor's process of group %s is not all SCHED_IDLE: %w", r.plan.tenants[i].Name, err))
			}
		}
		errs = append(errs, p.Stop())
	}
	r.procs = nil
	errs = append(errs, r.removeCgroups())
	return errors.Join(errs...)
}
