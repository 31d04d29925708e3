package grpcsched

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/schedtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// service is the tests' gRPC service. A unary call does what its
// payload's body says: "hold" signals entered and waits for proceed (or
// the call's end), "panic" panics, "status" and "error" return those
// errors, "spin" computes for 20ms with a Checkpoint per pass ("spin 1s"
// for 1s of slot time), anything else answers at once. Every answer's
// Username is whether the handler found its task. A full-duplex stream
// answers each message the same way, "panic" panicking.
type service struct {
	testgrpc.UnimplementedTestServiceServer
	calls            atomic.Int32 // handler runs
	entered, proceed chan struct{}
}

func newService() *service {
	return &service{entered: make(chan struct{}), proceed: make(chan struct{})}
}

func (sv *service) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	sv.calls.Add(1)
	task := TaskFrom(ctx)
	switch string(req.GetPayload().GetBody()) {
	case "hold":
		sv.entered <- struct{}{}
		select {
		case <-sv.proceed:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	case "panic":
		panic("handler panics")
	case "status":
		return nil, status.Error(codes.NotFound, "the handler's own status")
	case "error":
		return nil, errors.New("the handler's own error")
	case "spin":
		for start := time.Now(); time.Since(start) < 20*time.Millisecond; {
			if err := task.Checkpoint(); err != nil {
				return nil, status.FromContextError(err).Err()
			}
		}
	case "spin 1s":
		// A second of slot time: the handler's time less its waits for a
		// slot, so that it holds one as long however many share them.
		for start, waited := time.Now(), task.Waited(); time.Since(start)-(task.Waited()-waited) < time.Second; {
			if err := task.Checkpoint(); err != nil {
				return nil, status.FromContextError(err).Err()
			}
		}
	}
	return &testgrpc.SimpleResponse{Username: fmt.Sprint(task != nil)}, nil
}

func (sv *service) FullDuplexCall(stream testgrpc.TestService_FullDuplexCallServer) error {
	sv.calls.Add(1)
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if string(req.GetPayload().GetBody()) == "panic" {
			panic("stream handler panics")
		}
		task := TaskFrom(stream.Context())
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{
			Payload: &testgrpc.Payload{Body: []byte(fmt.Sprint(task != nil))},
		}); err != nil {
			return err
		}
	}
}

// serve starts a gRPC server with opts and sv on a TCP listener on
// 127.0.0.1 and returns a client of it; both end with the test.
func serve(t *testing.T, sv *service, opts ...grpc.ServerOption) testgrpc.TestServiceClient {
	t.Helper()
	srv := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(srv, sv)
	return serveOn(t, srv)
}

// serveOn serves srv on a TCP listener on 127.0.0.1 and returns a client
// of it; both end with the test.
func serveOn(t *testing.T, srv *grpc.Server) testgrpc.TestServiceClient {
	t.Helper()
	return dial(t, start(t, srv))
}

// start serves srv on a TCP listener on 127.0.0.1, stopped at the end of
// the test, and returns its address.
func start(t *testing.T, srv *grpc.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String()
}

// dial returns a client of the server at addr, closed at the end of the
// test.
func dial(t *testing.T, addr string, opts ...grpc.DialOption) testgrpc.TestServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return testgrpc.NewTestServiceClient(conn)
}

// duplex is a client's full-duplex stream in a test.
type duplex struct {
	t      *testing.T
	stream testgrpc.TestService_FullDuplexCallClient
}

// openStream opens a full-duplex stream; it fails the test if the call
// cannot start.
func openStream(t *testing.T, ctx context.Context, c testgrpc.TestServiceClient) *duplex {
	t.Helper()
	stream, err := c.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &duplex{t, stream}
}

// exchange sends a message whose body is what and returns the answer's
// body: whether the handler found its task.
func (d *duplex) exchange(what string) (string, error) {
	if err := d.stream.Send(&testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: []byte(what)}}); err != nil {
		return "", err
	}
	out, err := d.stream.Recv()
	return string(out.GetPayload().GetBody()), err
}

// close ends the stream from the client's side and checks that the
// handler returned.
func (d *duplex) close() {
	d.t.Helper()
	d.stream.CloseSend()
	if _, err := d.stream.Recv(); err != io.EOF {
		d.t.Errorf("the stream's end: got %v, want io.EOF", err)
	}
}

// scheduled returns the server options of interceptors of s with opts.
func scheduled(s *cpusched.Scheduler, opts ...Option) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(UnaryServerInterceptor(s, opts...)),
		grpc.ChainStreamInterceptor(StreamServerInterceptor(s, opts...)),
	}
}

// request returns a unary request whose body is what.
func request(what string) *testgrpc.SimpleRequest {
	return &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte(what)}}
}

// testContext returns a context that ends with the test, or after 10s.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// checkCode reports an error whose code is not want.
func checkCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Errorf("%s: got %v (%v), want %v", what, got, err, want)
	}
}

// logBuffer returns a logger that writes into the returned buffer.
func logBuffer() (*slog.Logger, *syncBuffer) {
	b := new(syncBuffer)
	return slog.New(slog.NewTextHandler(b, nil)), b
}

// syncBuffer is a bytes.Buffer for a logger that gRPC's goroutines use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestTaskFrom(t *testing.T) {
	// Inside a handler TaskFrom returns the call's task, unary or
	// streaming; outside one, nil (and in a method WithMethods leaves out:
	// TestMethodsLeftOut).
	s := schedtest.NewScheduler(t)
	c := serve(t, newService(), scheduled(s)...)
	ctx := testContext(t)
	resp, err := c.UnaryCall(ctx, request("ok"))
	if err != nil || resp.GetUsername() != "true" {
		t.Errorf("unary: got %v, %v; want the task found", resp, err)
	}
	stream := openStream(t, ctx, c)
	for range 2 {
		if found, err := stream.exchange("ok"); err != nil || found != "true" {
			t.Errorf("stream: got %q, %v; want the task found", found, err)
		}
	}
	stream.close()
	if got := TaskFrom(ctx); got != nil {
		t.Errorf("outside a handler: got %p, want nil", got)
	}
	if st := s.Stats(); st.Completed != 2 {
		t.Errorf("got %d tasks completed, want 2: the unary call and the stream", st.Completed)
	}
}

func TestMethodsLeftOut(t *testing.T) {
	// A method WithMethods leaves out runs without a task, and counts as a
	// call; the others are tasks.
	s := schedtest.NewScheduler(t)
	sv := newService()
	srv := grpc.NewServer(scheduled(s, WithMethods(func(m string) bool { return !strings.HasSuffix(m, "/UnaryCall") }))...)
	testgrpc.RegisterTestServiceServer(srv, sv)
	c := serveOn(t, srv)
	resp, err := c.UnaryCall(testContext(t), request("ok"))
	if err != nil || resp.GetUsername() != "false" {
		t.Errorf("got %v, %v; want an answer without a task", resp, err)
	}
	if st := s.Stats(); st.Submitted != 0 {
		t.Errorf("got %d tasks submitted, want 0", st.Submitted)
	}
}

func TestStreamIsOneTask(t *testing.T) {
	// A stream is one task for its life, and while its handler waits in
	// Recv it holds no slot: on a one-slot scheduler a unary call gets
	// through while the stream is open.
	s := schedtest.NewScheduler(t)
	c := serve(t, newService(), scheduled(s)...)
	ctx := testContext(t)
	stream := openStream(t, ctx, c)
	if _, err := stream.exchange("ok"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := c.UnaryCall(ctx, request("ok")); err != nil {
			t.Fatalf("unary call %d beside the open stream: %v", i, err)
		}
	}
	if st := s.Stats(); st.Started != 1 || st.Blocked != 1 || st.Completed != 3 {
		t.Errorf("with the stream open: got %d started, %d blocked, %d completed; want 1, 1 (the stream, in Recv), 3", st.Started, st.Blocked, st.Completed)
	}
	stream.close()
	if st := s.Stats(); st.Submitted != 4 || st.Completed != 4 {
		t.Errorf("after the stream: got %d submitted, %d completed; want 4, 4", st.Submitted, st.Completed)
	}
}

func TestTaskOptions(t *testing.T) {
	// WithTaskOptions applies to every call; WithCallTaskOptions adds
	// options from the call's context (its metadata here) and full method,
	// after them.
	s := schedtest.NewScheduler(t)
	var methods []string
	call := WithCallTaskOptions(func(ctx context.Context, method string) ([]cpusched.TaskOption, error) {
		methods = append(methods, method) // calls are serial in this test
		md, _ := metadata.FromIncomingContext(ctx)
		if g := md.Get("tenant"); len(g) == 1 {
			return []cpusched.TaskOption{cpusched.WithGroup(g[0] + method)}, nil
		}
		return nil, nil
	})
	c := serve(t, newService(), scheduled(s, WithTaskOptions(cpusched.WithClass(cpusched.ClassBatch), cpusched.WithGroup("all")), call)...)
	ctx := testContext(t)
	if _, err := c.UnaryCall(ctx, request("ok")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UnaryCall(metadata.AppendToOutgoingContext(ctx, "tenant", "t1"), request("ok")); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Classes[cpusched.ClassBatch].Submitted != 2 {
		t.Errorf("got %d batch tasks, want 2", st.Classes[cpusched.ClassBatch].Submitted)
	}
	const unary = "/grpc.testing.TestService/UnaryCall"
	if st.OtherGroups.Submitted != 2 {
		t.Errorf("got %d tasks in untracked groups, want 2 (groups all and t1%s)", st.OtherGroups.Submitted, unary)
	}
	if len(methods) != 2 || methods[0] != unary {
		t.Errorf("got methods %q, want the full method twice", methods)
	}
	if err := s.SetGroupWeight("t1"+unary, 200); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UnaryCall(metadata.AppendToOutgoingContext(ctx, "tenant", "t1"), request("ok")); err != nil {
		t.Fatal(err)
	}
	if g := s.Stats().Groups["t1"+unary]; g.Submitted != 1 {
		t.Errorf("got %d tasks in the per-call group, want 1", g.Submitted)
	}
}

func TestTaskOptionsRefused(t *testing.T) {
	// A bad option or the function's error: codes.InvalidArgument with the
	// message, not logged, the handler never run, and the call never
	// counted against the limit.
	for _, tc := range []struct {
		name string
		fn   func(context.Context, string) ([]cpusched.TaskOption, error)
		want string
	}{
		{"out of range", func(context.Context, string) ([]cpusched.TaskOption, error) {
			return []cpusched.TaskOption{cpusched.WithNice(99)}, nil
		}, "WithNice(99)"},
		{"too long a group", func(context.Context, string) ([]cpusched.TaskOption, error) {
			return []cpusched.TaskOption{cpusched.WithGroup(strings.Repeat("g", cpusched.MaxGroupNameLen+1))}, nil
		}, fmt.Sprint(cpusched.MaxGroupNameLen)},
		{"the function's error", func(context.Context, string) ([]cpusched.TaskOption, error) {
			return nil, errors.New("tenant header: want one of a, b; got \"c\"")
		}, "tenant header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := schedtest.NewScheduler(t)
			sv := newService()
			logger, logs := logBuffer()
			c := serve(t, sv, scheduled(s, WithCallTaskOptions(tc.fn), WithMaxQueueWait(time.Second), WithLogger(logger))...)
			for range 5 { // more than the limit admits before a first call ends (4 on 1 slot), were they counted
				_, err := c.UnaryCall(testContext(t), request("ok"))
				checkCode(t, tc.name, err, codes.InvalidArgument)
				if !strings.Contains(status.Convert(err).Message(), tc.want) {
					t.Errorf("got message %q, want it to name %q", status.Convert(err).Message(), tc.want)
				}
			}
			if sv.calls.Load() != 0 || logs.String() != "" || s.Stats().Submitted != 0 {
				t.Errorf("got %d handler calls, %d tasks and log %q; want none", sv.calls.Load(), s.Stats().Submitted, logs)
			}
		})
	}
}
