package loadreport

// The process's CPU budget, which cpu_utilization is a share of.

import (
	"os"
	"runtime"
	"strconv"

	"github.com/cpusched/cpusched/internal/cgroupcpu"
)

// cpuBudget returns the CPUs the process may use: the fewest of the
// machine's CPUs, GOMAXPROCS (as the runtime set it from the cgroup limit,
// the GOMAXPROCS variable, or the program's own call), the GOMAXPROCS
// variable and the cgroup CPU limit, which may be a fraction (0.3 for a
// quota of 30 ms per 100 ms period). The variable is read as well because
// IsolationOSPriority raises GOMAXPROCS by one while it is open, and the
// cgroup limit because GOMAXPROCS rounds it up: a 0.3-CPU container's
// GOMAXPROCS is 2, its budget 0.3. A limit that cannot be read is left
// out.
func cpuBudget() float64 {
	b := float64(min(runtime.NumCPU(), runtime.GOMAXPROCS(0)))
	if n, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err == nil && n > 0 {
		b = min(b, float64(n))
	}
	if limit, ok, err := cgroupcpu.Limit(); err == nil && ok {
		b = min(b, limit)
	}
	return b
}
