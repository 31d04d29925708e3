package httpsched

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Auto's cost on a light route's request, once the route is classified,
// against the same ServeMux served directly (BenchmarkAutoMuxDirect):
// the route lookup (the mux's Handler method, a second routing of the
// request), the table's map and the sample count. The writer is reused,
// so that the allocations counted are the server's own.

// discardWriter is a ResponseWriter that keeps nothing but its header.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

// lightMux is a mux of a few routes, a light one among them.
func lightMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /light", emptyHandler)
	mux.Handle("GET /users/{id}", emptyHandler)
	mux.Handle("POST /hash", emptyHandler)
	return mux
}

func benchAuto(b *testing.B, h http.Handler, parallel bool) {
	b.Helper()
	r := httptest.NewRequest("GET", "/light", nil)
	// Classify the route: its first requests are all measured.
	for range 64 {
		h.ServeHTTP(&discardWriter{h: http.Header{}}, r)
	}
	b.ReportAllocs()
	b.ResetTimer()
	if !parallel {
		w := &discardWriter{h: http.Header{}}
		for b.Loop() {
			h.ServeHTTP(w, r)
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		w := &discardWriter{h: http.Header{}}
		for pb.Next() {
			h.ServeHTTP(w, r)
		}
	})
}

func BenchmarkAutoMuxDirect(b *testing.B) {
	b.Run("serial", func(b *testing.B) { benchAuto(b, lightMux(), false) })
	b.Run("parallel", func(b *testing.B) { benchAuto(b, lightMux(), true) })
}

func BenchmarkAutoLight(b *testing.B) {
	b.Run("serial", func(b *testing.B) { benchAuto(b, Auto(benchScheduler(b), lightMux()), false) })
	b.Run("parallel", func(b *testing.B) { benchAuto(b, Auto(benchScheduler(b), lightMux()), true) })
}
