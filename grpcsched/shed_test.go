package grpcsched

// The calls that are refused or fail: shedding, the queue-wait limit, a
// client that leaves, panics, the handler's own errors, bad options; and
// the default isolation mode.

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/schedtest"
)

// checkPushback reports a trailer without the pushback want.
func checkPushback(t *testing.T, what string, trailer metadata.MD, want string) {
	t.Helper()
	if got := trailer.Get("grpc-retry-pushback-ms"); len(got) != 1 || got[0] != want {
		t.Errorf("%s: got grpc-retry-pushback-ms %q, want %q", what, got, want)
	}
}

func TestShed(t *testing.T) {
	// A full queue and a closed scheduler answer codes.Unavailable at
	// once, with the pushback trailer, and the handler never runs.
	s := schedtest.NewScheduler(t, cpusched.WithQueueLimit(1))
	sv := newService()
	c := serve(t, sv, scheduled(s, WithPushback(250*time.Millisecond+1))...)
	ctx := testContext(t)
	release := schedtest.HoldSlot(t, s)
	h, err := s.Go(ctx, func(*cpusched.Task) error { return nil }) // fills the queue of 1
	if err != nil {
		t.Fatal(err)
	}
	var trailer metadata.MD
	_, err = c.UnaryCall(ctx, request("ok"), grpc.Trailer(&trailer))
	checkCode(t, "unary, queue full", err, codes.Unavailable)
	checkPushback(t, "unary, queue full", trailer, "251")
	stream := openStream(t, ctx, c)
	_, err = stream.stream.Recv()
	checkCode(t, "stream, queue full", err, codes.Unavailable)
	checkPushback(t, "stream, queue full", stream.stream.Trailer(), "251")
	release()
	h.Wait()

	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	trailer = nil
	_, err = c.UnaryCall(ctx, request("ok"), grpc.Trailer(&trailer))
	checkCode(t, "closed", err, codes.Unavailable)
	checkPushback(t, "closed", trailer, "251")
	if n := sv.calls.Load(); n != 0 {
		t.Errorf("got %d handler calls, want 0", n)
	}
}

func TestMaxQueueWait(t *testing.T) {
	// The limit is the one httpsched has (internal/admission), one per
	// method: it starts at the 2 slots, halves when a call waits longer
	// than 10ms, and a call that finds it reached is answered
	// codes.Unavailable with the pushback at once, before it is queued.
	s := schedtest.NewScheduler(t, cpusched.WithWorkers(2))
	sv := newService()
	ic, err := newInterceptor(s, []Option{WithMaxQueueWait(10 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, sv, grpc.UnaryInterceptor(ic.unary), grpc.StreamInterceptor(ic.stream))
	ctx := testContext(t)
	const unary = "/grpc.testing.TestService/UnaryCall"

	// Both slots held by other work: a call waits 30ms for one.
	r1, r2 := schedtest.HoldSlot(t, s), schedtest.HoldSlot(t, s)
	done := make(chan error)
	go func() { _, err := c.UnaryCall(ctx, request("ok")); done <- err }()
	schedtest.WaitQueued(t, s, 1)
	time.Sleep(30 * time.Millisecond)
	r1()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r2()
	if got := ic.limit(unary).Current(); got != 1 {
		t.Errorf("after a call that waited 30ms: got a limit of %d, want 1 (halved from 2)", got)
	}

	// At the limit of 1: a second call is shed at once.
	go func() { _, err := c.UnaryCall(ctx, request("hold")); done <- err }()
	<-sv.entered
	submitted := s.Stats().Submitted
	var trailer metadata.MD
	_, err = c.UnaryCall(ctx, request("ok"), grpc.Trailer(&trailer))
	checkCode(t, "at the limit", err, codes.Unavailable)
	checkPushback(t, "at the limit", trailer, "1000")
	if got := s.Stats().Submitted; got != submitted {
		t.Errorf("got %d tasks submitted, want %d: a shed call must not reach the scheduler", got, submitted)
	}
	// Another method has a limit of its own.
	stream := openStream(t, ctx, c)
	if _, err := stream.exchange("ok"); err != nil {
		t.Errorf("another method at the first's limit: %v", err)
	}
	stream.close()
	sv.proceed <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if in := ic.limit(unary).Inflight(); in != 0 {
		t.Errorf("got %d calls in flight after all ended, want 0", in)
	}
}

// TestMaxQueueWaitPerGroup: WithMaxQueueWait keeps a limit per group of
// a method's calls. A group whose call waited past d has its own limit
// halved and its calls shed; the other group's calls are admitted as
// before. Regression: each method had one limit, so a tenant whose
// group's light weight made its calls wait halved it for every tenant,
// and the other tenants' calls were shed (as httpsched's routes did, a
// tenant of weight 300 getting 275 of a route's 608 answers 503). The
// same holds for calls of one group at another class or nice level,
// whose waits differ as much.
func TestMaxQueueWaitPerGroup(t *testing.T) {
	t.Run("group", func(t *testing.T) {
		testMaxQueueWaitPerPlace(t, func(label string) []cpusched.TaskOption {
			return []cpusched.TaskOption{cpusched.WithGroup(label)}
		}, `in group "bronze"`)
	})
	t.Run("nice", func(t *testing.T) {
		testMaxQueueWaitPerPlace(t, func(label string) []cpusched.TaskOption {
			if label == "bronze" {
				return []cpusched.TaskOption{cpusched.WithNice(10)}
			}
			return nil
		}, "at class normal, nice 10")
	})
}

// testMaxQueueWaitPerPlace is TestMaxQueueWaitPerGroup with the calls
// labelled gold and bronze (metadata "label") run with optionsOf(label);
// wantMsg is in the message of bronze's shed call.
func testMaxQueueWaitPerPlace(t *testing.T, optionsOf func(label string) []cpusched.TaskOption, wantMsg string) {
	const d = 10 * time.Millisecond
	s := schedtest.NewScheduler(t, cpusched.WithWorkers(2))
	sv := newService()
	byMetadata := WithCallTaskOptions(func(ctx context.Context, _ string) ([]cpusched.TaskOption, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		return optionsOf(strings.Join(md.Get("label"), "")), nil
	})
	ic, err := newInterceptor(s, []Option{WithMaxQueueWait(d), byMetadata})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, sv, grpc.UnaryInterceptor(ic.unary))
	ctx := testContext(t)
	gold := metadata.AppendToOutgoingContext(ctx, "label", "gold")
	bronze := metadata.AppendToOutgoingContext(ctx, "label", "bronze")
	const unary = "/grpc.testing.TestService/UnaryCall"

	if _, err := c.UnaryCall(gold, request("ok")); err != nil { // ends gold's cold start
		t.Fatal(err)
	}
	// Both slots held by other work: bronze's first call waits 3d for one,
	// and bronze's limit halves from 2 to 1.
	r1, r2 := schedtest.HoldSlot(t, s), schedtest.HoldSlot(t, s)
	done := make(chan error, 2) // buffered: a failed test's calls still end
	go func() { _, err := c.UnaryCall(bronze, request("ok")); done <- err }()
	schedtest.WaitQueued(t, s, 1)
	time.Sleep(3 * d)
	r1()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r2()

	// One bronze call in flight: bronze's next is shed, gold's is not.
	go func() { _, err := c.UnaryCall(bronze, request("hold")); done <- err }()
	<-sv.entered
	_, err = c.UnaryCall(bronze, request("ok"))
	checkCode(t, "bronze, one of its calls in flight after one waited 3d", err, codes.Unavailable)
	if msg := status.Convert(err).Message(); !strings.Contains(msg, wantMsg) {
		t.Errorf("bronze's shed call: got message %q, want it to name whose limit it met (%q)", msg, wantMsg)
	}
	if _, err := c.UnaryCall(gold, request("ok")); err != nil {
		t.Errorf("gold, beside bronze's call at bronze's limit of 1: got %v, want it served", err)
	}
	sv.proceed <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if in := ic.limit(unary).Inflight(); in != 0 {
		t.Errorf("got %d calls in flight after all ended, want 0", in)
	}
}

func TestClientLeavesWhileQueued(t *testing.T) {
	// A call whose client cancels, or whose deadline passes, while it is
	// queued: the task is removed, the handler never runs, and the answer
	// is codes.Canceled or codes.DeadlineExceeded.
	s := schedtest.NewScheduler(t)
	sv := newService()
	c := serve(t, sv, scheduled(s)...)
	release := schedtest.HoldSlot(t, s)

	ctx, cancel := context.WithCancel(testContext(t))
	done := make(chan error)
	go func() { _, err := c.UnaryCall(ctx, request("ok")); done <- err }()
	schedtest.WaitQueued(t, s, 1)
	cancel()
	checkCode(t, "cancelled", <-done, codes.Canceled)

	dctx, dcancel := context.WithTimeout(testContext(t), 300*time.Millisecond)
	defer dcancel()
	stream, err := c.FullDuplexCall(dctx)
	if err != nil {
		t.Fatal(err)
	}
	schedtest.WaitQueued(t, s, 1)
	_, err = stream.Recv()
	checkCode(t, "deadline", err, codes.DeadlineExceeded)

	schedtest.WaitQueued(t, s, 0) // the server sees the end a moment after the client
	release()
	if st := s.Stats(); st.Canceled != 2 || sv.calls.Load() != 0 {
		t.Errorf("got %d tasks canceled, %d handler calls; want 2, 0", st.Canceled, sv.calls.Load())
	}
}

func TestPanic(t *testing.T) {
	// A panic is logged with its stack and answered codes.Internal; the
	// server goes on serving.
	s := schedtest.NewScheduler(t)
	logger, logs := logBuffer()
	c := serve(t, newService(), scheduled(s, WithLogger(logger))...)
	ctx := testContext(t)
	_, err := c.UnaryCall(ctx, request("panic"))
	checkCode(t, "unary panic", err, codes.Internal)
	_, err = openStream(t, ctx, c).exchange("panic")
	checkCode(t, "stream panic", err, codes.Internal)
	for _, want := range []string{"handler panics", "stream handler panics", "(*service).UnaryCall", "(*service).FullDuplexCall", "method=/grpc.testing.TestService/UnaryCall"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log %q: want %q in it (the panics, their stacks and the method)", logs, want)
		}
	}
	if _, err := c.UnaryCall(ctx, request("ok")); err != nil {
		t.Errorf("after the panics: %v", err)
	}
	if st := s.Stats(); st.Panicked != 2 || st.Started != 0 {
		t.Errorf("got %d panicked, %d running; want 2, 0", st.Panicked, st.Started)
	}
}

func TestHandlerErrors(t *testing.T) {
	// The handler's own errors pass through unchanged: a status error
	// with its code and message, another error as gRPC answers it.
	s := schedtest.NewScheduler(t)
	c := serve(t, newService(), scheduled(s)...)
	ctx := testContext(t)
	_, err := c.UnaryCall(ctx, request("status"))
	if st, _ := status.FromError(err); st.Code() != codes.NotFound || st.Message() != "the handler's own status" {
		t.Errorf("got %v, want NotFound with the handler's message", err)
	}
	_, err = c.UnaryCall(ctx, request("error"))
	if st, _ := status.FromError(err); st.Code() != codes.Unknown || st.Message() != "the handler's own error" {
		t.Errorf("got %v, want Unknown with the handler's message, as without the interceptor", err)
	}
	if st := s.Stats(); st.Failed != 2 {
		t.Errorf("got %d tasks failed, want 2", st.Failed)
	}
}

func TestDefaultIsolation(t *testing.T) {
	// ospriority on Linux (the handlers may run on hand-off threads),
	// reserve elsewhere: unary, streaming and a panic.
	s := schedtest.NewScheduler(t, cpusched.WithIsolation(cpusched.DefaultIsolation()))
	logger, _ := logBuffer()
	c := serve(t, newService(), scheduled(s, WithLogger(logger))...)
	ctx := testContext(t)
	if resp, err := c.UnaryCall(ctx, request("spin")); err != nil || resp.GetUsername() != "true" {
		t.Errorf("unary: got %v, %v", resp, err)
	}
	_, err := c.UnaryCall(ctx, request("panic"))
	checkCode(t, "panic", err, codes.Internal)
	stream := openStream(t, ctx, c)
	for range 3 {
		if found, err := stream.exchange("ok"); err != nil || found != "true" {
			t.Errorf("stream: got %q, %v", found, err)
		}
	}
	stream.close()
	t.Logf("isolation %v", s.Stats().Isolation)
}

func TestOptionErrors(t *testing.T) {
	s := schedtest.NewScheduler(t)
	for _, tt := range []struct {
		s    *cpusched.Scheduler
		opt  Option
		want string
	}{
		{nil, nil, "grpcsched: the scheduler is nil"},
		{s, WithMaxQueueWait(0), "grpcsched: WithMaxQueueWait(0s): the wait must be positive"},
		{s, WithPushback(-time.Millisecond), "grpcsched: WithPushback(-1ms): must be in 0s..24h0m0s"},
		{s, WithPushback(25 * time.Hour), "grpcsched: WithPushback(25h0m0s): must be in 0s..24h0m0s"},
		{s, WithLogger(nil), "grpcsched: WithLogger(nil): the logger must not be nil"},
		{s, WithMethods(nil), "grpcsched: WithMethods(nil): the function must not be nil"},
		{s, WithCallTaskOptions(nil), "grpcsched: WithCallTaskOptions(nil): the function must not be nil"},
		{s, WithTaskOptions(cpusched.WithNice(20)), "grpcsched: WithTaskOptions: cpusched: WithNice(20): nice must be in -20..19"},
	} {
		if _, err := NewUnaryServerInterceptor(tt.s, tt.opt); err == nil || err.Error() != tt.want {
			t.Errorf("NewUnaryServerInterceptor: got %v, want %q", err, tt.want)
		}
		if _, err := NewStreamServerInterceptor(tt.s, tt.opt); err == nil || err.Error() != tt.want {
			t.Errorf("NewStreamServerInterceptor: got %v, want %q", err, tt.want)
		}
		for name, f := range map[string]func(){
			"UnaryServerInterceptor":  func() { UnaryServerInterceptor(tt.s, tt.opt) },
			"StreamServerInterceptor": func() { StreamServerInterceptor(tt.s, tt.opt) },
		} {
			func() {
				defer func() {
					if p, _ := recover().(error); p == nil || p.Error() != tt.want {
						t.Errorf("%s: got panic %v, want %q", name, p, tt.want)
					}
				}()
				f()
			}()
		}
	}
	for _, ok := range []Option{WithPushback(0), WithPushback(24 * time.Hour), nil} {
		if _, err := NewUnaryServerInterceptor(s, ok); err != nil {
			t.Errorf("got %v, want no error", err)
		}
	}
}

func TestPushbackMillis(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0", 1: "1", time.Millisecond: "1", time.Millisecond + 1: "2", time.Second: "1000", 24 * time.Hour: "86400000"} {
		if got := pushbackMillis(d); got != want {
			t.Errorf("pushbackMillis(%v) = %q, want %q", d, got, want)
		}
	}
}
