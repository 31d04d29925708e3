package fleet

// The gRPC demo service: the demo server's CRC32 work as three unary
// methods. It is described by hand (a grpc.ServiceDesc whose messages are
// protobuf's well-known types), so that it needs no generated code.

import (
	"context"
	"hash/crc32"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/cmd/internal/demo"
	"github.com/cpusched/cpusched/grpcsched"
)

// ServiceName is the demo service's gRPC name.
const ServiceName = "cpusched.fleet.Demo"

// The methods, as the report names them.
const (
	MethodHeavy = "heavy"
	MethodSmall = "small"
	MethodFast  = "fast"
)

// HeavyPasses is the heavy method's CRC32 passes over demo.BufferSize
// bytes: a call of about 4 ms of CPU, long against the fast method and
// short against the calls' deadline (docs/grpc.md has the time measured).
const HeavyPasses = 500

// method is one method of the demo service.
type method struct {
	name   string // as the report names it
	rpc    string // as gRPC names it, in the service
	passes int    // CRC32 passes, each followed by a Checkpoint
}

// methods are the service's methods: the heavy CRC work, the demo server's
// small task, and a fast method that computes nothing.
var methods = [...]method{
	{MethodHeavy, "Heavy", HeavyPasses},
	{MethodSmall, "Small", demo.SmallTaskPasses},
	{MethodFast, "Fast", 0},
}

const numMethods = len(methods)

// The methods' indexes in methods.
const (
	heavy = iota
	small
	fast
)

// mix is the order the client's calls take their methods in, one after
// another: half the calls heavy, a quarter small, a quarter fast, so that
// the heavy work is most of the CPU and the fast method shows what waiting
// behind it costs.
var mix = [...]int{heavy, small, heavy, fast}

// MethodNames returns the methods' names, in the order the report lists them.
func MethodNames() []string {
	names := make([]string, numMethods)
	for i, m := range methods {
		names[i] = m.name
	}
	return names
}

// fullMethod is method i's full gRPC name, "/cpusched.fleet.Demo/Heavy".
func fullMethod(i int) string { return "/" + ServiceName + "/" + methods[i].rpc }

// service serves the demo service and runs the batch job.
type service struct {
	buf         []byte // read-only: the CRC32 input
	served      [numMethods]atomic.Int64
	batchPasses atomic.Int64
}

func newService() *service { return &service{buf: make([]byte, demo.BufferSize)} }

// register registers the service's methods on srv.
func (s *service) register(srv *grpc.Server) {
	desc := grpc.ServiceDesc{
		ServiceName: ServiceName,
		// The handlers are closures over s, so any implementation will
		// do: gRPC checks only that the registered one implements this.
		HandlerType: (*any)(nil),
	}
	for i, m := range methods {
		desc.Methods = append(desc.Methods, grpc.MethodDesc{MethodName: m.rpc, Handler: s.handler(i)})
	}
	srv.RegisterService(&desc, nil)
}

// handler is method i's grpc.MethodHandler, as protoc-gen-go-grpc writes
// them: decode the request, then call the method through the interceptor.
func (s *service) handler(i int) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := new(emptypb.Empty)
		if err := dec(in); err != nil {
			return nil, err
		}
		call := func(ctx context.Context, _ any) (any, error) { return s.serve(ctx, i) }
		if interceptor == nil {
			return call(ctx, in)
		}
		return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: fullMethod(i)}, call)
	}
}

// serve runs method i: its CRC32 passes, a Checkpoint after each.
func (s *service) serve(ctx context.Context, i int) (*wrapperspb.UInt32Value, error) {
	s.served[i].Add(1)
	task := grpcsched.TaskFrom(ctx)
	var sum uint32
	for range methods[i].passes {
		sum = crc32.Update(sum, crc32.IEEETable, s.buf)
		if task == nil {
			continue // outside the interceptor: nothing to yield to
		}
		if err := task.Checkpoint(); err != nil {
			return nil, status.FromContextError(err).Err() // the client left, or the replica is closing
		}
	}
	return wrapperspb.UInt32(sum), nil
}

// batch is the batch job: CRC32 passes, a Checkpoint after each, until its
// task is cancelled. It runs at ClassIdle, so every call's task is served
// ahead of it and its Checkpoints give the slot up as soon as one waits.
func (s *service) batch(task *cpusched.Task) error {
	var sum uint32
	for {
		sum = crc32.Update(sum, crc32.IEEETable, s.buf)
		s.batchPasses.Add(1)
		if err := task.Checkpoint(); err != nil {
			return err
		}
	}
}
