package grpcsched

import (
	"context"
	"testing"

	"google.golang.org/grpc"

	"github.com/cpusched/cpusched/internal/schedtest"
)

// TestMethodsAreKinds: one interceptor serves two methods, in one group:
// each call's kind is its method (cpusched.WithKind), so the scheduler
// does not take the small calls of /t.S/Small for those of /t.S/Call
// that cannot yield (schedtest.KindRig says how it checks).
func TestMethodsAreKinds(t *testing.T) {
	var rig schedtest.KindRig
	intercept := UnaryServerInterceptor(schedtest.NewScheduler(t))
	handler := func(ctx context.Context, req any) (any, error) {
		rig.Work(TaskFrom(ctx), req == "call")
		return nil, nil
	}
	rig.Check(t, func(ctx context.Context, call bool) {
		method, req := "/t.S/Small", "small"
		if call {
			method, req = "/t.S/Call", "call"
		}
		intercept(ctx, req, &grpc.UnaryServerInfo{FullMethod: method}, handler)
	})
}
