package httpsched

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
)

// BenchmarkAutoThreshold measures what Auto's threshold decides: a
// medium route of CPU cost c served directly (the threshold above c) or
// as tasks (below it), beside closed-loop requests of 20 ms that cannot
// yield (Auto finds them heavy in both) and a 1 ms probe, on a loopback
// server in this process, in the default mode. Each sub-benchmark runs
// one window whatever b.N; it reports the probe's p99, the medium
// route's p99 and the heavy requests' rate. Run it with
//
//	go test -run '^$' -bench AutoThreshold -benchtime 1x ./httpsched
//
// docs/performance.md#auto has the figures behind DefaultHeavyThreshold.
func BenchmarkAutoThreshold(b *testing.B) {
	for _, c := range []time.Duration{100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 1500 * time.Microsecond, 2 * time.Millisecond, 4 * time.Millisecond} {
		for _, asTask := range []bool{false, true} {
			name := fmt.Sprintf("medium=%v/direct", c)
			threshold := min(4*c, 10*time.Millisecond)
			if asTask {
				name = fmt.Sprintf("medium=%v/task", c)
				threshold = c / 2
			}
			b.Run(name, func(b *testing.B) { benchThreshold(b, c, threshold) })
		}
	}
}

func benchThreshold(b *testing.B, medium, threshold time.Duration) {
	s, err := cpusched.New()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	mux := http.NewServeMux()
	mux.HandleFunc("/heavy", func(w http.ResponseWriter, r *http.Request) { spin(20 * time.Millisecond) })
	mux.HandleFunc("/medium", func(w http.ResponseWriter, r *http.Request) { spin(medium) })
	mux.HandleFunc("/probe", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Millisecond)
		io.WriteString(w, "ok")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: Auto(s, mux, WithHeavyThreshold(threshold))}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	defer client.CloseIdleConnections()
	get := func(path string) time.Duration {
		start := time.Now()
		resp, err := client.Get(base + path)
		if err != nil {
			return -1
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(start)
	}

	const warmup, window = time.Second, 4 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), warmup+window)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var heavyDone int
	measureFrom := time.Now().Add(warmup)
	for range 4 { // closed-loop heavy clients: both CPUs' worth and a queue
		wg.Go(func() {
			for ctx.Err() == nil {
				if get("/heavy") > 0 && time.Now().After(measureFrom) {
					mu.Lock()
					heavyDone++
					mu.Unlock()
				}
			}
		})
	}
	// Open loops: the medium route at a tenth of a CPU, the probe at 200/s.
	openLoop := func(path string, every time.Duration) *[]time.Duration {
		var lat []time.Duration
		wg.Go(func() {
			var inner sync.WaitGroup
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					inner.Wait()
					return
				case <-tick.C:
				}
				inner.Go(func() {
					d := get(path)
					if d > 0 && time.Now().After(measureFrom) {
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					}
				})
			}
		})
		return &lat
	}
	mediumLat := openLoop("/medium", max(10*medium, 2*time.Millisecond))
	probeLat := openLoop("/probe", 5*time.Millisecond)
	for b.Loop() {
		wg.Wait()
	}
	p99 := func(lat []time.Duration) float64 {
		if len(lat) == 0 {
			return 0
		}
		slices.Sort(lat)
		return float64(lat[len(lat)*99/100]) / 1e6
	}
	b.ReportMetric(p99(*probeLat), "probe-p99-ms")
	b.ReportMetric(p99(*mediumLat), "medium-p99-ms")
	b.ReportMetric(float64(heavyDone)/window.Seconds(), "heavy/s")
	b.ReportMetric(0, "ns/op")
}
