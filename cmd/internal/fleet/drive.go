package fleet

// The client: one grpc-go channel over the segment's replicas, balanced by
// the row's policy, driven open loop at the scenario's rate, the calls due
// at a fixed interval or at Poisson times. Each call's latency runs
// from the time it was due, as `cpusched load` measures (so a late client
// is charged, not hidden), and its deadline is Timeout after that.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/balancer/weightedroundrobin" // registers weighted_round_robin
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/cpusched/cpusched/cmd/internal/load"
	"github.com/cpusched/cpusched/internal/loadreport"
)

// The weighted policy's periods, shortened from grpc-go's defaults (a 10 s
// blackout, a 1 s update) so that a row of a few seconds runs on weights:
// the blackout is shorter than QuickWarmup, and 100 ms is the shortest
// update period grpc-go allows.
const (
	wrrBlackout = "1s"
	wrrUpdate   = "0.1s"
)

// serviceConfig returns the channel's service config for policy.
func serviceConfig(policy string) string {
	if policy == PolicyRoundRobin {
		return `{"loadBalancingConfig": [{"round_robin": {}}]}`
	}
	return `{"loadBalancingConfig": [{"weighted_round_robin": {"blackoutPeriod": "` + wrrBlackout +
		`", "weightUpdatePeriod": "` + wrrUpdate + `"}}]}`
}

// Latency histogram geometry: microseconds from 1 us to 2 minutes (past
// MaxTimeout), 3 significant digits, as the load generator's.
const (
	latencyMinUs   = 1
	latencyMaxUs   = 120_000_000
	latencySigFigs = 3
)

// loadReportKey is the trailer of ORCA's per-call load report (gRFC A51).
const loadReportKey = "endpoint-load-metrics-bin"

// driveSpec is one segment's load.
type driveSpec struct {
	addrs            []string // the replicas', loopback only
	policy           string
	rate             float64
	arrivals         string // ArrivalsFixed or ArrivalsPoisson
	seed             uint64 // of the Poisson arrivals: the same seed, the same due times
	warmup, duration time.Duration
	timeout          time.Duration
	// window is called when the measured window starts (true) and ends
	// (false): when the first measured call falls due, and when the last
	// due time has passed.
	window func(start bool)
}

// recording is what a row's calls did, in its measured window.
type recording struct {
	mu       sync.Mutex
	all      *hdrhistogram.Histogram
	methods  [numMethods]methodRec
	replicas []replicaRec
	// unpicked counts the calls that failed before a replica was picked.
	unpicked int64
	errCodes map[string]int64
}

type methodRec struct {
	hist          *hdrhistogram.Histogram
	calls, errors int64
}

type replicaRec struct {
	hist          *hdrhistogram.Histogram
	calls, errors int64
	// reports counts the load reports read from the calls' trailers, and
	// app and cpu sum their utilizations.
	reports  int64
	app, cpu float64
	// heavyReports counts the heavy calls' reports, and heavyRun and
	// heavyWait sum their request costs: the call's slot time and its
	// wait for CPU, in ms.
	heavyReports        int64
	heavyRun, heavyWait float64
}

func newRecording(replicas int) *recording {
	r := &recording{
		all:      newHistogram(),
		replicas: make([]replicaRec, replicas),
		errCodes: map[string]int64{},
	}
	for i := range r.methods {
		r.methods[i].hist = newHistogram()
	}
	for i := range r.replicas {
		r.replicas[i].hist = newHistogram()
	}
	return r
}

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(latencyMinUs, latencyMaxUs, latencySigFigs)
}

// dial opens the channel: a manual resolver with the replicas' addresses,
// the policy's service config, and a dialer that refuses anything but
// loopback.
func dial(addrs []string, policy string) (*grpc.ClientConn, error) {
	var endpoints []resolver.Endpoint
	for _, a := range addrs {
		if err := checkLoopback(a); err != nil {
			return nil, err
		}
		endpoints = append(endpoints, resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}})
	}
	r := manual.NewBuilderWithScheme("fleet")
	r.InitialState(resolver.State{Endpoints: endpoints})
	return grpc.NewClient(r.Scheme()+":///replicas",
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(serviceConfig(policy)),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			if err := checkLoopback(addr); err != nil {
				return nil, err
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}))
}

// checkLoopback fails unless addr is host:port with a loopback IP.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("replica address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("replica address %q: the load goes to loopback addresses only", addr)
	}
	return nil
}

// drive runs the row's load and returns what its measured calls did. It
// returns once every call has ended (each within its deadline), or early
// with ctx's error.
func drive(ctx context.Context, spec driveSpec) (*recording, error) {
	conn, err := dial(spec.addrs, spec.policy)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	index := make(map[string]int, len(spec.addrs))
	for i, a := range spec.addrs {
		index[a] = i
	}
	rec := newRecording(len(spec.addrs))

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var calls sync.WaitGroup
	start := time.Now()
	windowStart, end := start.Add(spec.warmup), start.Add(spec.warmup+spec.duration)
	started := false
	next := dueTimes(spec.arrivals, spec.rate, spec.seed)
	for i := int64(0); ; i++ {
		due := start.Add(next())
		if !due.Before(end) {
			break
		}
		if !load.WaitUntil(ctx, timer, due) {
			break
		}
		measured := !due.Before(windowStart)
		if measured && !started {
			spec.window(true)
			started = true
		}
		m := mix[i%int64(len(mix))]
		calls.Go(func() { rec.call(ctx, conn, index, m, due, spec.timeout, measured) })
	}
	if load.WaitUntil(ctx, timer, end) && started {
		spec.window(false)
	}
	calls.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return rec, nil
}

// dueTimes returns a function that gives the due time of each call in
// turn, as offsets from the start: at a fixed interval (load's schedule),
// or a Poisson process at rate whose exponential gaps come from seed.
func dueTimes(arrivals string, rate float64, seed uint64) func() time.Duration {
	if arrivals != ArrivalsPoisson {
		var i int64
		return func() time.Duration {
			d := load.DueOffset(i, rate)
			i++
			return d
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	var at float64 // seconds; the first call is due at the start, as with the fixed interval
	return func() time.Duration {
		d := time.Duration(at * float64(time.Second))
		at += rng.ExpFloat64() / rate
		return d
	}
}

// call makes one call of method m due at due and, if measured, records it.
func (r *recording) call(ctx context.Context, conn *grpc.ClientConn, index map[string]int, m int, due time.Time, timeout time.Duration, measured bool) {
	ctx, cancel := context.WithDeadline(ctx, due.Add(timeout))
	defer cancel()
	var p peer.Peer
	var trailer metadata.MD
	err := conn.Invoke(ctx, fullMethod(m), &emptypb.Empty{}, new(wrapperspb.UInt32Value), grpc.Peer(&p), grpc.Trailer(&trailer))
	latency := time.Since(due)
	if !measured {
		return
	}
	replica := -1
	if p.Addr != nil {
		if i, ok := index[p.Addr.String()]; ok {
			replica = i
		}
	}
	report := loadReport(trailer)
	r.record(m, replica, latency, err, report)
}

// loadReport decodes the call's ORCA load report, nil if it has none.
func loadReport(trailer metadata.MD) *v3orcapb.OrcaLoadReport {
	v := trailer.Get(loadReportKey)
	if len(v) == 0 {
		return nil
	}
	lr := new(v3orcapb.OrcaLoadReport)
	if proto.Unmarshal([]byte(v[0]), lr) != nil {
		return nil
	}
	return lr
}

// record counts a measured call: every call's latency is recorded, a
// failed one's up to its failure, so that failing fast never lowers a
// percentile below what the calls took.
func (r *recording) record(m, replica int, latency time.Duration, err error, report *v3orcapb.OrcaLoadReport) {
	us := min(max(latency.Microseconds(), latencyMinUs), latencyMaxUs)
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.all.RecordValue(us)
	mr := &r.methods[m]
	_ = mr.hist.RecordValue(us)
	mr.calls++
	if err != nil {
		mr.errors++
		r.errCodes[status.Code(err).String()]++
	}
	if replica < 0 {
		r.unpicked++
		return
	}
	rr := &r.replicas[replica]
	_ = rr.hist.RecordValue(us)
	rr.calls++
	if err != nil {
		rr.errors++
	}
	if report != nil {
		rr.reports++
		rr.app += report.GetApplicationUtilization()
		rr.cpu += report.GetCpuUtilization()
		if run, ok := report.GetRequestCost()[loadreport.RunCost]; ok && m == heavy {
			rr.heavyReports++
			rr.heavyRun += run
			rr.heavyWait += report.GetRequestCost()[loadreport.QueueWaitCost]
		}
	}
}
