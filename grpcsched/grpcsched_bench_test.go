package grpcsched

import (
	"context"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/schedtest"
)

// The interceptor's cost per call, against the same empty handler called
// directly (BenchmarkUnaryDirect) and from an interceptor that calls s.Run
// itself (BenchmarkUnaryRun). IsolationNone with a slot per P, no network:
// the numbers are about the interceptor, not gRPC's transport.

func emptyHandler(context.Context, any) (any, error) { return nil, nil }

var benchInfo = &grpc.UnaryServerInfo{FullMethod: "/bench.Service/Method"}

// benchUnary calls f as gRPC would call a unary interceptor, serially and
// in parallel.
func benchUnary(b *testing.B, f func(*cpusched.Scheduler) grpc.UnaryServerInterceptor) {
	for _, parallel := range []bool{false, true} {
		name := "serial"
		if parallel {
			name = "parallel"
		}
		b.Run(name, func(b *testing.B) {
			ic := f(schedtest.NewScheduler(b, cpusched.WithWorkers(runtime.GOMAXPROCS(0))))
			ctx := context.Background()
			b.ReportAllocs()
			if !parallel {
				for b.Loop() {
					ic(ctx, nil, benchInfo, emptyHandler)
				}
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					ic(ctx, nil, benchInfo, emptyHandler)
				}
			})
		})
	}
}

func BenchmarkUnaryDirect(b *testing.B) {
	benchUnary(b, func(*cpusched.Scheduler) grpc.UnaryServerInterceptor {
		return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(ctx, req)
		}
	})
}

// BenchmarkUnaryRun is the baseline a user would write by hand: s.Run
// around the handler, with the task's context.
func BenchmarkUnaryRun(b *testing.B) {
	benchUnary(b, func(s *cpusched.Scheduler) grpc.UnaryServerInterceptor {
		return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
			s.Run(ctx, func(t *cpusched.Task) error {
				resp, err = h(t.Context(), req)
				return err
			})
			return resp, err
		}
	})
}

func BenchmarkUnaryInterceptor(b *testing.B) {
	benchUnary(b, func(s *cpusched.Scheduler) grpc.UnaryServerInterceptor { return UnaryServerInterceptor(s) })
}

func BenchmarkUnaryInterceptorMaxQueueWait(b *testing.B) {
	benchUnary(b, func(s *cpusched.Scheduler) grpc.UnaryServerInterceptor {
		return UnaryServerInterceptor(s, WithMaxQueueWait(time.Second))
	})
}

// BenchmarkServerMetrics is the provider's share of each call's trailer:
// one report (a Stats sample at most every 100ms) and its maps.
func BenchmarkServerMetrics(b *testing.B) {
	p := ServerMetricsProvider(schedtest.NewScheduler(b))
	b.ReportAllocs()
	for b.Loop() {
		p.ServerMetrics()
	}
}
