package grpcsched

import (
	"context"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
)

// serverStream is the stream a scheduled streaming handler gets: the
// task's context, and RecvMsg and SendMsg inside Task.Blocking.
type serverStream struct {
	grpc.ServerStream
	ctx  context.Context
	call *call
	// done is set when the handler returns: a stream used after that
	// (wrongly, but gRPC lets it) no longer touches the ended task.
	done atomic.Bool
}

func (s *serverStream) Context() context.Context { return s.ctx }

// RecvMsg waits for the client's next message without holding a slot.
func (s *serverStream) RecvMsg(m any) error {
	return s.blocking(func() error { return s.ServerStream.RecvMsg(m) })
}

// SendMsg sends m, waiting for flow control without holding a slot.
func (s *serverStream) SendMsg(m any) error {
	return s.blocking(func() error { return s.ServerStream.SendMsg(m) })
}

// blocking runs fn inside the task's Blocking and adds its time to the
// call's, which its run cost leaves out.
func (s *serverStream) blocking(fn func() error) error {
	if s.done.Load() {
		return fn()
	}
	var err error
	start := time.Now()
	s.call.task.Blocking(func() { err = fn() })
	s.call.blocked += time.Since(start)
	return err
}
