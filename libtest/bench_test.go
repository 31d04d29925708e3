package libtest

// Run beside the usual ways to bound concurrency, each per task:
//
//	go test -run '^$' -bench . -benchmem ./libtest/
//
// BaselineGoroutine is a plain goroutine + WaitGroup, the cost a caller
// pays for "go fn()" and waiting; Semaphore and Errgroup are
// golang.org/x/sync's. The library's own benchmarks, with the goroutine
// baseline, are in its bench_test.go.

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/cpusched/cpusched"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
)

func emptyTask(*cpusched.Task) error { return nil }

func BenchmarkBaselineGoroutine(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var wg sync.WaitGroup
		for pb.Next() {
			wg.Add(1)
			go func() { wg.Done() }()
			wg.Wait()
		}
	})
}

func BenchmarkBaselineSemaphore(b *testing.B) {
	sem := semaphore.NewWeighted(int64(runtime.GOMAXPROCS(0)))
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := sem.Acquire(ctx, 1); err != nil {
				b.Fatal(err)
			}
			emptyTask(nil)
			sem.Release(1)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := sem.Acquire(ctx, 1); err != nil {
					b.Fatal(err)
				}
				emptyTask(nil)
				sem.Release(1)
			}
		})
	})
}

func BenchmarkBaselineErrgroup(b *testing.B) {
	b.ReportAllocs()
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for b.Loop() {
		g.Go(func() error { return nil })
	}
	g.Wait()
}

// BenchmarkRun is Run in every isolation mode, serial and in parallel,
// for the baselines above.
func BenchmarkRun(b *testing.B) {
	ctx := context.Background()
	for _, mode := range cpusched.IsolationModes() {
		b.Run(mode.String(), func(b *testing.B) {
			s := newScheduler(b, cpusched.WithIsolation(mode))
			b.Run("serial", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := s.Run(ctx, emptyTask); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := s.Run(ctx, emptyTask); err != nil {
							b.Fatal(err)
						}
					}
				})
			})
		})
	}
}
