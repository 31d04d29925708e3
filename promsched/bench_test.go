package promsched

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/schedtest"
)

// benchGroups is the number of groups the benchmarks' scheduler has had
// tasks in (plus the default group).
const benchGroups = 4

// newBenchScheduler returns a scheduler that has run tasks in the default
// group and in benchGroups others, so that every histogram has counts.
func newBenchScheduler(b *testing.B) *cpusched.Scheduler {
	s := schedtest.NewScheduler(b)
	for g := range benchGroups + 1 {
		group := ""
		if g > 0 {
			group = fmt.Sprintf("tenant-%d", g)
		}
		for range 10 {
			if err := s.Run(context.Background(), func(*cpusched.Task) error { return nil }, cpusched.WithGroup(group)); err != nil {
				b.Fatal(err)
			}
		}
	}
	return s
}

// BenchmarkCollect measures one scrape's work, against its baseline, the
// Stats snapshot it starts with:
//
//   - Stats: s.Stats() alone;
//   - Collect: the collector's Collect into a buffered channel;
//   - Gather: a registry's Gather (Collect, checks, sorting into families)
//     and the text encoding promhttp writes.
func BenchmarkCollect(b *testing.B) {
	s := newBenchScheduler(b)
	c := NewCollector(s)

	b.Run("Stats", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = s.Stats()
		}
	})
	b.Run("Collect", func(b *testing.B) {
		b.ReportAllocs()
		ch := make(chan prometheus.Metric, 16+4*4+6*(benchGroups+1))
		for b.Loop() {
			c.Collect(ch)
			for len(ch) > 0 {
				<-ch
			}
		}
	})
	b.Run("Gather", func(b *testing.B) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(c)
		b.ReportAllocs()
		for b.Loop() {
			families, err := reg.Gather()
			if err != nil {
				b.Fatal(err)
			}
			enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
			for _, f := range families {
				if err := enc.Encode(f); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
