package bench

import (
	"reflect"
	"testing"

	"github.com/cpusched/cpusched/cmd/internal/demo"
)

// TestGCWindow: a window's pauses are the buckets' growth between the two
// /stats reads, whatever the server had before.
func TestGCWindow(t *testing.T) {
	b := func(lo, hi float64, n uint64) demo.Bucket { return demo.Bucket{LoMS: lo, HiMS: hi, Count: n} }
	stats := func(total, stopping []demo.Bucket) serverStats {
		var st serverStats
		st.GC.Total.Buckets, st.GC.Stopping.Buckets = total, stopping
		return st
	}
	tests := []struct {
		name          string
		before, after serverStats
		want          GCPauses
	}{
		{"no pauses at all", stats(nil, nil), stats(nil, nil), GCPauses{}},
		{"none in the window", stats([]demo.Bucket{b(1, 2, 5)}, []demo.Bucket{b(0.01, 0.02, 5)}),
			stats([]demo.Bucket{b(1, 2, 5)}, []demo.Bucket{b(0.01, 0.02, 5)}), GCPauses{}},
		{"the first ones", stats(nil, nil),
			stats([]demo.Bucket{b(0.1, 0.2, 99), b(3, 4, 1)}, []demo.Bucket{b(0.01, 0.02, 100)}),
			GCPauses{Pauses: 100, PauseP99Ms: 0.2, PauseMaxMs: 4, StoppingP99Ms: 0.02, StoppingMaxMs: 0.02}},
		// A long pause before the window is not the window's max: the
		// cumulative max (50 ms) would have said otherwise.
		{"an old long pause left out", stats([]demo.Bucket{b(0.1, 0.2, 10), b(40, 50, 1)}, []demo.Bucket{b(30, 40, 1)}),
			stats([]demo.Bucket{b(0.1, 0.2, 208), b(0.5, 0.6, 2), b(40, 50, 1)}, []demo.Bucket{b(0.01, 0.02, 200), b(30, 40, 1)}),
			GCPauses{Pauses: 200, PauseP99Ms: 0.2, PauseMaxMs: 0.6, StoppingP99Ms: 0.02, StoppingMaxMs: 0.02}},
		{"p99 below the max", stats(nil, nil),
			stats([]demo.Bucket{b(0.1, 0.2, 198), b(1, 2, 1), b(7, 8, 1)}, []demo.Bucket{b(0.01, 0.02, 199), b(6, 7, 1)}),
			GCPauses{Pauses: 200, PauseP99Ms: 0.2, PauseMaxMs: 8, StoppingP99Ms: 0.02, StoppingMaxMs: 7}},
		{"the +Inf bucket as its lower bound", stats(nil, nil), stats([]demo.Bucket{b(1000, 1000, 1)}, nil),
			GCPauses{Pauses: 1, PauseP99Ms: 1000, PauseMaxMs: 1000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := gcWindow(tt.before, tt.after); got == nil || *got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSubtractBuckets(t *testing.T) {
	b := func(lo, hi float64, n uint64) demo.Bucket { return demo.Bucket{LoMS: lo, HiMS: hi, Count: n} }
	tests := []struct {
		name           string
		later, earlier []demo.Bucket
		want           []demo.Bucket
	}{
		{"empty", nil, nil, nil},
		{"all new", []demo.Bucket{b(1, 2, 3)}, nil, []demo.Bucket{b(1, 2, 3)}},
		{"growth only", []demo.Bucket{b(1, 2, 3), b(2, 3, 4), b(5, 6, 1)}, []demo.Bucket{b(1, 2, 3), b(2, 3, 1)},
			[]demo.Bucket{b(2, 3, 3), b(5, 6, 1)}},
		{"a count that shrank is left out", []demo.Bucket{b(1, 2, 1)}, []demo.Bucket{b(1, 2, 3)}, nil},
	}
	for _, tt := range tests {
		if got := subtractBuckets(tt.later, tt.earlier); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
