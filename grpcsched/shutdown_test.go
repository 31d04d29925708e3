package grpcsched

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/drain"
	"github.com/cpusched/cpusched/internal/schedtest"
)

// stopSlack is how much later than its deadline GracefulStop may return:
// the force and the test's own scheduling, under -race on a shared
// machine.
const stopSlack = 300 * time.Millisecond

// callResult is what a unary call got.
type callResult struct {
	err     error
	trailer metadata.MD
}

// callAsync makes a unary call whose body is what, and returns where its
// result will arrive.
func callAsync(ctx context.Context, c testgrpc.TestServiceClient, what string) <-chan callResult {
	got := make(chan callResult, 1)
	go func() {
		var r callResult
		_, r.err = c.UnaryCall(ctx, request(what), grpc.Trailer(&r.trailer))
		got <- r
	}()
	return got
}

// gracefulStop runs GracefulStop with a context of deadline, and returns
// how long it took and its error.
func gracefulStop(srv *grpc.Server, s *cpusched.Scheduler, deadline time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	err := GracefulStop(ctx, srv, s)
	return time.Since(start), err
}

func TestGracefulStopLetsACallInFlightFinish(t *testing.T) {
	s := schedtest.NewScheduler(t)
	sv := newService()
	srv := grpc.NewServer(scheduled(s)...)
	testgrpc.RegisterTestServiceServer(srv, sv)
	c := serveOn(t, srv)
	got := callAsync(testContext(t), c, "hold")
	<-sv.entered
	time.AfterFunc(100*time.Millisecond, func() { close(sv.proceed) })

	const deadline = 5 * time.Second
	took, err := gracefulStop(srv, s, deadline)
	if err != nil {
		t.Errorf("GracefulStop: got %v, want nil", err)
	}
	checkCode(t, "the call in flight", (<-got).err, codes.OK)
	if took > deadline-drain.Grace {
		t.Errorf("GracefulStop took %v, want it back once the call ended, before the cut at %v", took, deadline-drain.Grace)
	}
}

func TestGracefulStopAnswersUnavailableToTheCallsItCuts(t *testing.T) {
	// One slot: the first call holds it until its context ends, the second
	// waits in the queue. At the cut both get codes.Unavailable with the
	// pushback trailer, for the client to retry elsewhere.
	s := schedtest.NewScheduler(t)
	sv := newService()
	srv := grpc.NewServer(scheduled(s, WithPushback(1500*time.Millisecond))...)
	testgrpc.RegisterTestServiceServer(srv, sv)
	c := serveOn(t, srv)
	ctx := testContext(t)
	running := callAsync(ctx, c, "hold")
	<-sv.entered
	queued := callAsync(ctx, c, "hold")
	schedtest.WaitQueued(t, s, 1)

	const deadline = time.Second
	took, err := gracefulStop(srv, s, deadline)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GracefulStop: got %v, want an error that wraps context.DeadlineExceeded (calls were cut)", err)
	}
	for name, got := range map[string]<-chan callResult{"running": running, "queued": queued} {
		r := <-got
		checkCode(t, name, r.err, codes.Unavailable)
		checkPushback(t, name, r.trailer, "1500")
	}
	if took > deadline+stopSlack {
		t.Errorf("GracefulStop took %v, want at most its deadline, %v", took, deadline)
	}
	if cut := drain.CutAt(time.Time{}, time.Time{}.Add(deadline)).Sub(time.Time{}); took < cut {
		t.Errorf("GracefulStop took %v, want the calls given until the cut, %v in", took, cut)
	}
}

// stuckService's call signals entered and waits for release, whatever
// happens to its context.
type stuckService struct {
	testgrpc.UnimplementedTestServiceServer
	entered, release chan struct{}
}

func (sv *stuckService) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	close(sv.entered)
	<-sv.release
	return &testgrpc.SimpleResponse{}, nil
}

func TestGracefulStopStopsAHandlerThatIgnoresTheCut(t *testing.T) {
	s := schedtest.NewScheduler(t)
	sv := &stuckService{entered: make(chan struct{}), release: make(chan struct{})}
	srv := grpc.NewServer(scheduled(s)...)
	testgrpc.RegisterTestServiceServer(srv, sv)
	c := serveOn(t, srv)
	got := callAsync(testContext(t), c, "")
	<-sv.entered

	const deadline = 500 * time.Millisecond
	took, err := gracefulStop(srv, s, deadline)
	close(sv.release)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GracefulStop: got %v, want an error that wraps context.DeadlineExceeded", err)
	}
	if took > deadline+stopSlack {
		t.Errorf("GracefulStop took %v, want at most its deadline, %v", took, deadline)
	}
	checkCode(t, "the stuck call", (<-got).err, codes.Unavailable) // the connection closed
}
