package grpcsched_test

import (
	"context"
	"fmt"
	"hash/crc32"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/orca"
	"google.golang.org/grpc/status"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/grpcsched"
)

// hasher is a gRPC service whose unary call is CPU-heavy: a CRC over the
// payload, many passes, with a Checkpoint after each.
type hasher struct {
	testgrpc.UnimplementedTestServiceServer
}

func (hasher) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	task := grpcsched.TaskFrom(ctx)
	var sum uint32
	for range 1000 {
		sum = crc32.Update(sum, crc32.IEEETable, req.GetPayload().GetBody())
		if err := task.Checkpoint(); err != nil { // yields when its slice ends
			return nil, status.FromContextError(err).Err()
		}
	}
	return &testgrpc.SimpleResponse{Username: fmt.Sprint(sum)}, nil
}

// Example wires the interceptors and the load reports into a gRPC server:
// each call runs as a task, sheds with codes.Unavailable past a 100ms
// queueing delay, and ends with an ORCA load report in its trailer.
func Example() {
	s, err := cpusched.New()
	if err != nil {
		panic(err)
	}
	defer s.Close(context.Background())

	opts := []grpcsched.Option{
		grpcsched.WithTaskOptions(cpusched.WithNice(5)),
		grpcsched.WithMaxQueueWait(100 * time.Millisecond),
	}
	srv := grpc.NewServer(
		orca.CallMetricsServerOption(grpcsched.ServerMetricsProvider(s)), // first, as grpc-go's orca asks
		grpc.ChainUnaryInterceptor(grpcsched.UnaryServerInterceptor(s, opts...)),
		grpc.ChainStreamInterceptor(grpcsched.StreamServerInterceptor(s, opts...)),
	)
	testgrpc.RegisterTestServiceServer(srv, hasher{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	var trailer metadata.MD
	resp, err := testgrpc.NewTestServiceClient(conn).UnaryCall(context.Background(),
		&testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("block")}}, grpc.Trailer(&trailer))
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.GetUsername(), len(trailer.Get("endpoint-load-metrics-bin")))
	// Output: 1904180682 1
}
