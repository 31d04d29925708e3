package grpcsched

// A call whose task Close cut while it ran.

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/cpusched/cpusched/internal/schedtest"
)

// cutService's handlers signal entered, compute with Checkpoints until
// their task is cut, then answer as the request's body says: "as is"
// returns Checkpoint's error, "status" status.FromContextError of it,
// "context" the task context's error, "own" a status of the handler's
// own (codes.Aborted), anything else an answer. Its stream does the
// same with its first message.
type cutService struct {
	testgrpc.UnimplementedTestServiceServer
	entered chan struct{}
}

func (sv *cutService) answer(ctx context.Context, what string) error {
	sv.entered <- struct{}{}
	task := TaskFrom(ctx)
	err := task.Checkpoint()
	for ; err == nil; err = task.Checkpoint() {
	}
	switch what {
	case "as is":
		return err
	case "status":
		return status.FromContextError(err).Err()
	case "context":
		return ctx.Err()
	case "own":
		return status.Error(codes.Aborted, "the handler's own")
	}
	return nil
}

func (sv *cutService) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if err := sv.answer(ctx, string(req.GetPayload().GetBody())); err != nil {
		return nil, err
	}
	return &testgrpc.SimpleResponse{}, nil
}

func (sv *cutService) FullDuplexCall(stream testgrpc.TestService_FullDuplexCallServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	return sv.answer(stream.Context(), string(req.GetPayload().GetBody()))
}

func TestClosedWhileRunning(t *testing.T) {
	// Close gives up waiting and cuts a running call's task: the error its
	// handler returns for it (Checkpoint's cpusched.ErrClosed, as is or
	// through status.FromContextError, or the context's error) becomes
	// codes.Unavailable with the pushback trailer, as a shed call's, so
	// that the client retries elsewhere (it got Unknown or Canceled). A
	// status code of the handler's own, and an answer, pass unchanged.
	tests := []struct {
		what     string
		stream   bool
		wantCode codes.Code
	}{
		{"as is", false, codes.Unavailable},
		{"status", false, codes.Unavailable},
		{"context", false, codes.Unavailable},
		{"own", false, codes.Aborted},
		{"answer", false, codes.OK},
		{"as is", true, codes.Unavailable},
		{"context", true, codes.Unavailable},
		{"own", true, codes.Aborted},
	}
	for _, tt := range tests {
		name := tt.what
		if tt.stream {
			name += ", stream"
		}
		t.Run(name, func(t *testing.T) {
			s := schedtest.NewScheduler(t)
			sv := &cutService{entered: make(chan struct{})}
			srv := grpc.NewServer(scheduled(s, WithPushback(1500*time.Millisecond))...)
			testgrpc.RegisterTestServiceServer(srv, sv)
			c := serveOn(t, srv)
			ctx := testContext(t)
			type result struct {
				err     error
				trailer metadata.MD
			}
			done := make(chan result, 1)
			go func() {
				var r result
				if tt.stream {
					stream := openStream(t, ctx, c)
					_, r.err = stream.exchange(tt.what)
					r.trailer = stream.stream.Trailer()
				} else {
					_, r.err = c.UnaryCall(ctx, request(tt.what), grpc.Trailer(&r.trailer))
				}
				done <- r
			}()
			<-sv.entered
			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			if err := s.Close(cancelled); err != context.Canceled {
				t.Fatalf("Close: got %v, want context.Canceled (it gives up at once)", err)
			}
			r := <-done
			checkCode(t, name, r.err, tt.wantCode)
			if tt.wantCode == codes.Unavailable {
				checkPushback(t, name, r.trailer, "1500")
			}
		})
	}
}
