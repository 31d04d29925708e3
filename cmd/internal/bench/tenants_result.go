// The tenants step's figures: each group's samples at the window's ends,
// and its share of the work against its weight's.

package bench

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/demo"
)

// tenantSample is one group's state at one end of the window.
type tenantSample struct {
	passes      float64        // the server's count of the group's passes
	cpu         *time.Duration // the floor's process's CPU time
	ok, failed  *int64         // the clients' tasks, outside the floor
	runTimeMs   *float64       // the group's GroupStats.RunTime
	serverCPUMs *float64       // the group's CPU time, where the server reports it (serverGroupCPU)
}

// sample reads every group's state: the floor's processes' CPU times,
// or the server's per-group figures in st and the clients' counts. The
// floor's processes are read from /proc rather than asked for their
// passes: a SCHED_IDLE process in the least-weighted cgroup, on a
// machine others keep busy, may not answer for many seconds.
func (r *tenantRun) sample(st serverStats) ([]tenantSample, error) {
	out := make([]tenantSample, len(r.plan.tenants))
	for i, t := range r.plan.tenants {
		s := &out[i]
		if r.procs != nil {
			cpu, err := processCPUTime(r.procs[i].PID())
			if err != nil {
				return nil, fmt.Errorf("the floor's process of group %s: %w", t.Name, err)
			}
			s.cpu = &cpu
			continue
		}
		s.passes = float64(st.PassesByGroup[t.Name])
		ok, failed := r.counts[i].ok.Load(), r.counts[i].failed.Load()
		s.ok, s.failed = &ok, &failed
		if g, found := st.Scheduler.Groups[t.Name]; found {
			run := g.RunTimeMS
			s.runTimeMs, s.serverCPUMs = &run, serverGroupCPU(g)
		}
	}
	return out, nil
}

// processCPUTime returns the CPU time process pid's threads have used:
// the sum of their /proc/PID/task/TID/schedstat run times (ns), or where
// the kernel has no schedstat, /proc/PID/stat's (10 ms ticks). A thread
// that has exited no longer counts; the Go runtime ends few.
func processCPUTime(pid int) (time.Duration, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if errors.Is(err, os.ErrNotExist) && sum == 0 {
			break // no schedstat here; a thread that just ended leaves a sum
		}
		if err != nil {
			continue // the thread ended since the listing
		}
		ns, err := strconv.ParseInt(strings.Fields(string(data) + " x")[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed %s/schedstat: %q", t.Name(), data)
		}
		sum += time.Duration(ns)
	}
	if sum > 0 {
		return sum, nil
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcCPUTime(stat)
}

// serverGroupCPU returns a group's CPU time, in ms, from the server's
// /stats: the cpu time column of the scheduled modes (the floor's is its
// process's).
func serverGroupCPU(g demo.GroupStats) *float64 { return &g.CPUTimeMS }

// TenantsResult is the tenants step's figures beside its probe's: each
// group's share of the CPU work over the window against its weight.
type TenantsResult struct {
	// WindowS is the window's length, s: CPU times over it are CPUs.
	WindowS float64       `json:"window_s"`
	Groups  []TenantGroup `json:"groups"`
	// Weighted says how the floor's groups were weighted ("a SCHED_IDLE
	// process per group, each in a cgroup of cpu.shares
	// 3072:1024:1024:256 (cgroup v1 /sys/fs/cgroup/cpu)"), in the floor;
	// NoShares why they were not, and the floor's shares are left out.
	Weighted string `json:"weighted,omitempty"`
	NoShares string `json:"no_shares,omitempty"`
	// ShareOf is what the shares are of: "passes", or in the floor
	// "cpu_time".
	ShareOf string `json:"share_of"`
}

// TenantGroup is one group's figures over the tenants step's window.
type TenantGroup struct {
	Tenant
	// WeightShare is the group's weight over the sum of the weights: the
	// share of the CPU work it is owed while every group has work.
	WeightShare float64 `json:"weight_share"`
	// PassesPerS is its CRC32 passes per second: its CPU work; nil in the
	// floor, whose processes are not asked (tenantRun.sample).
	PassesPerS *float64 `json:"passes_per_s"`
	// Share is its part of all the groups' CPU work (TenantsResult.ShareOf:
	// their passes; in the floor, their processes' CPU time, all of which
	// is passes), and ShareX that over WeightShare (1: as the weights say;
	// a bursty group may leave its part to the others). Nil in the floor
	// without weighted cgroups (TenantsResult.NoShares) and where no group
	// did any work.
	Share  *float64 `json:"share"`
	ShareX *float64 `json:"share_x"`
	// Tasks and Errors are its clients' tasks answered 200 in the window,
	// and those that failed; nil in the floor, whose processes run the
	// work in the stead of clients.
	Tasks  *int64 `json:"tasks,omitempty"`
	Errors *int64 `json:"errors,omitempty"`
	// RunTimeMs is its tasks' slot time in the window (GroupStats.RunTime),
	// in the scheduled modes; CPUTimeMs is the CPU time its work used, in
	// the floor its process's (processCPUTime). Over WindowS
	// (ms/1000), either is CPUs.
	RunTimeMs *float64 `json:"run_time_ms"`
	CPUTimeMs *float64 `json:"cpu_time_ms"`
}

// tenantsResult returns the step's figures from the window's two ends.
func (r *tenantRun) tenantsResult(before, after []tenantSample, window time.Duration) *TenantsResult {
	res := &TenantsResult{WindowS: window.Seconds(), Weighted: r.weighted, NoShares: r.noShares, ShareOf: "passes"}
	floor := r.procs != nil
	if floor {
		res.ShareOf = "cpu_time"
	} else {
		res.NoShares = "" // the scheduled modes always have their shares
	}
	weights := make([]int, len(r.plan.tenants))
	work := make([]float64, len(r.plan.tenants))
	for i, t := range r.plan.tenants {
		weights[i], work[i] = t.Weight, max(after[i].passes-before[i].passes, 0)
		if floor && after[i].cpu != nil && before[i].cpu != nil {
			work[i] = max(float64(*after[i].cpu-*before[i].cpu), 0)
		}
	}
	owed, share, ratio := tenantShares(weights, work)
	for i, t := range r.plan.tenants {
		b, a := before[i], after[i]
		g := TenantGroup{Tenant: t, WeightShare: owed[i]}
		if !floor && window > 0 {
			perS := work[i] / window.Seconds()
			g.PassesPerS = &perS
		}
		if res.NoShares == "" {
			g.Share, g.ShareX = share[i], ratio[i]
		}
		g.Tasks, g.Errors = diff(b.ok, a.ok), diff(b.failed, a.failed)
		g.RunTimeMs = diff(b.runTimeMs, a.runTimeMs)
		g.CPUTimeMs = diff(b.serverCPUMs, a.serverCPUMs)
		if b.cpu != nil && a.cpu != nil {
			ms := float64(*a.cpu-*b.cpu) / 1e6
			g.CPUTimeMs = &ms
		}
		res.Groups = append(res.Groups, g)
	}
	return res
}

// tenantShares returns each group's owed share, its weight over the sum
// of weights, and its share of the work done, work[i] over the sum of
// work, with that share over the owed one (1: as the weights say). The
// shares and ratios are nil where no work was done at all, or a weight
// is not positive.
func tenantShares(weights []int, work []float64) (owed []float64, share, ratio []*float64) {
	owed = make([]float64, len(weights))
	share = make([]*float64, len(weights))
	ratio = make([]*float64, len(weights))
	totalWeight, totalWork := 0, 0.0
	for i, w := range weights {
		if w <= 0 {
			return owed, share, ratio
		}
		totalWeight += w
		totalWork += work[i]
	}
	for i, w := range weights {
		owed[i] = float64(w) / float64(totalWeight)
		if !(totalWork > 0) {
			continue
		}
		s := work[i] / totalWork
		x := s / owed[i]
		share[i], ratio[i] = &s, &x
	}
	return owed, share, ratio
}

// diff returns a-b, or nil where either is.
func diff[T int64 | float64](b, a *T) *T {
	if a == nil || b == nil {
		return nil
	}
	d := *a - *b
	return &d
}
