package grpcsched

import (
	"google.golang.org/grpc/orca"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/loadreport"
)

// ServerMetricsProvider returns the provider of s's load reports for
// grpc-go's orca package: for orca.CallMetricsServerOption, which sends
// one in the trailer of every call, and for orca.Register's out-of-band
// stream. Each report has
//   - application_utilization: the largest of the slot time of Realtime
//     and Normal tasks (at most their share of the process's CPU time)
//     over the slot capacity, the utilization that the mean number of
//     them queued for a first slot implies, and the CPU's saturation net
//     of ClassBatch and ClassIdle (plus the share of a cgroup quota's
//     periods in which it ran out); in an overload (every slot held
//     through the last quarter second, more tasks in than slots) at
//     least those tasks per slot, above 1 at once; never 0 while calls
//     come;
//   - cpu_utilization: the process's CPU time over its CPU budget
//     (GOMAXPROCS, the cgroup limit), left out where it cannot be read;
//   - qps: the calls that came to s's adapters (these interceptors and
//     httpsched's handlers) per second, always set; eps: those shed;
//   - the named metric cpusched_queue_wait_p99_ms: the calls' waits for
//     CPU, 99th percentile;
//
// averaged over the last second (docs/grpc.md#how-each-value-is-computed).
// The maps of the metrics it returns are never nil, and new at each call:
// grpc-go merges a call's own values into them.
//
// A nil s is a programmer's error: ServerMetricsProvider panics.
func ServerMetricsProvider(s *cpusched.Scheduler) orca.ServerMetricsProvider {
	if s == nil {
		panic("grpcsched: ServerMetricsProvider: the scheduler is nil")
	}
	return provider{loadreport.For(s)}
}

// provider is what ServerMetricsProvider returns.
type provider struct{ meter *loadreport.Meter }

// ServerMetrics returns the load report now.
func (p provider) ServerMetrics() *orca.ServerMetrics {
	r := p.meter.Report()
	return &orca.ServerMetrics{
		CPUUtilization: r.CPU, // -1, unset, where unknown
		MemUtilization: -1,
		AppUtilization: r.Application,
		QPS:            r.QPS,
		EPS:            r.EPS,
		Utilization:    map[string]float64{},
		RequestCost:    map[string]float64{},
		NamedMetrics:   map[string]float64{loadreport.QueueWaitP99Metric: loadreport.Millis(r.QueueWaitP99)},
	}
}
