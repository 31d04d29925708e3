package grpcsched

import (
	"fmt"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/pickfirst"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/orca"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/loadreport"
	"github.com/cpusched/cpusched/internal/schedtest"
)

// orcaServer returns the server options of the documented wiring (docs/grpc.md#wiring): the ORCA
// option first, then the interceptors of s with opts.
func orcaServer(s *cpusched.Scheduler, opts ...Option) []grpc.ServerOption {
	return append([]grpc.ServerOption{orca.CallMetricsServerOption(ServerMetricsProvider(s))}, scheduled(s, opts...)...)
}

// loadReport decodes a call's endpoint-load-metrics-bin trailer with the
// xds proto grpc-go's orca package writes.
func loadReport(t *testing.T, what string, trailer metadata.MD) *v3orcapb.OrcaLoadReport {
	t.Helper()
	bin := trailer.Get("endpoint-load-metrics-bin")
	if len(bin) != 1 {
		t.Fatalf("%s: got %d endpoint-load-metrics-bin trailers, want 1 (trailer %v)", what, len(bin), trailer)
	}
	r := new(v3orcapb.OrcaLoadReport)
	if err := proto.Unmarshal([]byte(bin[0]), r); err != nil {
		t.Fatalf("%s: the trailer does not decode: %v", what, err)
	}
	return r
}

// checkReport reports a load report without the values every report of a
// serving replica has: a utilization and a qps above 0 (else grpc-go's
// weighted_round_robin ignores it), the CPU's, and the wait p99.
func checkReport(t *testing.T, what string, r *v3orcapb.OrcaLoadReport) {
	t.Helper()
	if r.GetApplicationUtilization() <= 0 || r.GetRpsFractional() <= 0 || r.GetCpuUtilization() < 0 || r.GetEps() < 0 {
		t.Errorf("%s: got %v; want application_utilization and rps_fractional above 0", what, r)
	}
	if _, ok := r.GetNamedMetrics()[loadreport.QueueWaitP99Metric]; !ok {
		t.Errorf("%s: got named metrics %v, want %s", what, r.GetNamedMetrics(), loadreport.QueueWaitP99Metric)
	}
}

func TestLoadTrailer(t *testing.T) {
	// With the ORCA option first, every call through the interceptors
	// ends with the trailer, with the provider's report and the call's
	// own costs; a shed call too.
	s := schedtest.NewScheduler(t, cpusched.WithQueueLimit(1))
	c := serve(t, newService(), orcaServer(s)...)
	ctx := testContext(t)

	var trailer metadata.MD
	if _, err := c.UnaryCall(ctx, request("spin"), grpc.Trailer(&trailer)); err != nil {
		t.Fatal(err)
	}
	r := loadReport(t, "unary", trailer)
	checkReport(t, "unary", r)
	if run := r.GetRequestCost()[loadreport.RunCost]; run < 15 || run > 10_000 {
		t.Errorf("got a run cost of %vms for 20ms of computing, want about 20", run)
	}
	if _, ok := r.GetRequestCost()[loadreport.QueueWaitCost]; !ok {
		t.Errorf("got request costs %v, want %s", r.GetRequestCost(), loadreport.QueueWaitCost)
	}

	stream := openStream(t, ctx, c)
	if _, err := stream.exchange("ok"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // waiting in Recv: Blocking, not run time
	stream.close()
	r = loadReport(t, "stream", stream.stream.Trailer())
	checkReport(t, "stream", r)
	if run := r.GetRequestCost()[loadreport.RunCost]; run >= 15 {
		t.Errorf("stream: got a run cost of %vms, want less than the 20ms it waited in Recv", run)
	}

	release := schedtest.HoldSlot(t, s)
	if _, err := s.Go(ctx, func(*cpusched.Task) error { return nil }); err != nil {
		t.Fatal(err) // fills the queue of 1
	}
	trailer = nil
	_, err := c.UnaryCall(ctx, request("ok"), grpc.Trailer(&trailer))
	checkCode(t, "shed", err, codes.Unavailable)
	r = loadReport(t, "shed", trailer)
	checkReport(t, "shed", r)
	if r.GetEps() <= 0 {
		t.Errorf("shed: got eps %v, want above 0", r.GetEps())
	}
	release()
}

func TestServerMetrics(t *testing.T) {
	// The provider's maps are never nil (grpc-go merges into them) and new
	// at each call; qps and the utilizations are always set.
	s := schedtest.NewScheduler(t)
	p := ServerMetricsProvider(s)
	a, b := p.ServerMetrics(), p.ServerMetrics()
	if a.Utilization == nil || a.RequestCost == nil || a.NamedMetrics == nil {
		t.Fatalf("got nil maps in %+v", a)
	}
	a.NamedMetrics["x"] = 1
	if _, ok := b.NamedMetrics["x"]; ok {
		t.Error("two reports share a map")
	}
	if a.QPS < 0 || a.EPS < 0 || a.AppUtilization < 0 || a.MemUtilization != -1 {
		t.Errorf("got %+v, want qps, eps and the application utilization set, memory unset", a)
	}
	defer func() {
		if recover() == nil {
			t.Error("ServerMetricsProvider(nil): got no panic")
		}
	}()
	ServerMetricsProvider(nil)
}

// oobBalancer is pick_first with an ORCA out-of-band listener on each
// ready SubConn, as a client's weighted balancer registers one.
type oobBalancer struct{}

const oobBalancerName = "grpcsched_test_oob"

var oobReports = make(chan *v3orcapb.OrcaLoadReport, 16)

func init() { balancer.Register(oobBalancer{}) }

func (oobBalancer) Name() string { return oobBalancerName }

func (oobBalancer) Build(cc balancer.ClientConn, opts balancer.BuildOptions) balancer.Balancer {
	return balancer.Get(pickfirst.Name).Build(&oobClientConn{ClientConn: cc}, opts)
}

type oobClientConn struct{ balancer.ClientConn }

func (cc *oobClientConn) NewSubConn(addrs []resolver.Address, opts balancer.NewSubConnOptions) (balancer.SubConn, error) {
	var sc balancer.SubConn
	next := opts.StateListener
	opts.StateListener = func(st balancer.SubConnState) {
		if st.ConnectivityState == connectivity.Ready {
			orca.RegisterOOBListener(sc, oobListener{}, orca.OOBListenerOptions{ReportInterval: time.Second})
		}
		next(st)
	}
	// The one way for a balancer to see its SubConns become ready, which
	// pick_first calls and grpc-go's own ORCA tests wrap the same way.
	//lint:ignore SA1019 deprecated only in that a SubConn will take one address
	sc, err := cc.ClientConn.NewSubConn(addrs, opts)
	return sc, err
}

type oobListener struct{}

func (oobListener) OnLoadReport(r *v3orcapb.OrcaLoadReport) {
	select {
	case oobReports <- r:
	default:
	}
}

func TestOutOfBand(t *testing.T) {
	// orca.Register with the same provider: a client's out-of-band
	// listener gets its reports, and the ORCA stream, which the
	// interceptors leave alone, holds no slot of the one-slot scheduler.
	for len(oobReports) > 0 { // from an earlier run of the test
		<-oobReports
	}
	s := schedtest.NewScheduler(t)
	p := ServerMetricsProvider(s)
	srv := grpc.NewServer(append([]grpc.ServerOption{orca.CallMetricsServerOption(p)}, scheduled(s)...)...)
	testgrpc.RegisterTestServiceServer(srv, newService())
	if err := orca.Register(srv, orca.ServiceOptions{ServerMetricsProvider: p}); err != nil {
		t.Fatal(err)
	}
	addr := start(t, srv)
	c := dial(t, addr)
	ctx := testContext(t)
	for range 3 { // calls for the report's qps
		if _, err := c.UnaryCall(ctx, request("spin")); err != nil {
			t.Fatal(err)
		}
	}

	oob := dial(t, addr, grpc.WithDefaultServiceConfig(fmt.Sprintf(`{"loadBalancingConfig": [{%q: {}}]}`, oobBalancerName)))
	if _, err := oob.EmptyCall(ctx, &testgrpc.Empty{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("the first call, which connects: got %v, want Unimplemented", err)
	}
	select {
	case r := <-oobReports:
		checkReport(t, "out of band", r)
	case <-ctx.Done():
		t.Fatal("no out-of-band report within 10s")
	}
	if _, err := oob.UnaryCall(ctx, request("ok")); err != nil {
		t.Errorf("a call beside the open ORCA stream: %v", err)
	}
	if st := s.Stats(); st.Started != 0 {
		t.Errorf("got %d tasks started with only the ORCA stream open, want 0", st.Started)
	}
}
