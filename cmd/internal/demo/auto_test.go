package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// autoStats reads /stats and returns it with Auto's route named route.
func autoStats(t *testing.T, url, route string) (Stats, AutoRoute) {
	t.Helper()
	code, _, body := get(t, "GET", url+"/stats")
	if code != http.StatusOK {
		t.Fatalf("/stats: got %d %q, want 200", code, body)
	}
	var st Stats
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/stats is not JSON: %v\n%s", err, body)
	}
	for _, r := range st.AutoRoutes {
		if r.Route == route {
			return st, r
		}
	}
	t.Fatalf("/stats: auto_routes has no %q; got %+v", route, st.AutoRoutes)
	return st, AutoRoute{}
}

// TestAutoChecksumTurnsHeavy: with Config.Auto, /checksum's direct path
// is found heavy by its CPU, no route marked, and its requests then run
// as tasks: the answer carries the task's wait, the passes count as the
// scheduler's, and /stats lists the route heavy; /delay1ms stays light.
func TestAutoChecksumTurnsHeavy(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Auto measures CPU with Linux's thread CPU clocks: elsewhere every route stays light")
	}
	s, hs := newTestServer(t, Config{Workers: 1, Auto: true})
	// 200 passes read 50 MiB: milliseconds of CPU, well above the
	// threshold. The first two requests are measured and run directly;
	// the second decides.
	const n = 200
	want := `{"passes":200,"crc":"` + wantCRC(s, n) + `","sched":false}` + "\n"
	for i := range 2 {
		code, h, body := get(t, "GET", hs.URL+fmt.Sprintf("/checksum?n=%d&sched=0", n))
		if code != http.StatusOK || body != want {
			t.Fatalf("request %d: got %d %q, want 200 %q", i+1, code, body, want)
		}
		if h.Get(WaitedHeader) != "" {
			t.Errorf("request %d: got %s %q, want none: it ran before Auto had measured the route", i+1, WaitedHeader, h.Get(WaitedHeader))
		}
	}
	st, r := autoStats(t, hs.URL, "GET /checksum")
	if !r.Heavy || r.CPUMS <= 0 || r.Requests != 2 || r.Sampled != 2 || r.Moves != 1 {
		t.Fatalf("after two requests: got %+v, want heavy, cpu > 0, 2 requests sampled, 1 move", r)
	}
	if st.PassesDirect != 2*n || st.PassesSched != 0 {
		t.Errorf("after two requests: got passes direct %d sched %d, want %d and 0", st.PassesDirect, st.PassesSched, 2*n)
	}

	// Now a task: sched=1 is served as sched=0, class applies to Auto's
	// task.
	for _, path := range []string{"/checksum?n=200&sched=0", "/checksum?n=200&sched=1&class=batch", "/checksum?n=200&checkpoint=0"} {
		code, h, body := get(t, "GET", hs.URL+path)
		if code != http.StatusOK || body != want || h.Get(WaitedHeader) == "" {
			t.Errorf("%s: got %d %q with %s %q, want 200 %q with the header", path, code, body, WaitedHeader, h.Get(WaitedHeader), want)
		}
	}
	st, r = autoStats(t, hs.URL, "GET /checksum")
	if !r.Heavy || r.Requests != 5 {
		t.Errorf("after five requests: got %+v, want heavy, 5 requests", r)
	}
	if st.PassesDirect != 2*n || st.PassesSched != 3*n {
		t.Errorf("got passes direct %d sched %d, want %d and %d", st.PassesDirect, st.PassesSched, 2*n, 3*n)
	}
	if st.Scheduler.Completed != 3 || st.Scheduler.Classes["batch"].Submitted != 1 {
		t.Errorf("got %d tasks completed, %d batch, want 3 and 1", st.Scheduler.Completed, st.Scheduler.Classes["batch"].Submitted)
	}

	// A bad task option is checksum's 400, named, on the heavy route too.
	code, _, body := get(t, "GET", hs.URL+"/checksum?n=2&nice=99")
	if code != http.StatusBadRequest || !strings.HasPrefix(body, "nice: ") {
		t.Errorf("nice=99: got %d %q, want 400 naming nice", code, body)
	}

	for range 3 {
		if code, h, _ := get(t, "GET", hs.URL+"/delay1ms"); code != http.StatusOK || h.Get(WaitedHeader) != "" {
			t.Errorf("/delay1ms: got %d with %s %q, want 200 without", code, WaitedHeader, h.Get(WaitedHeader))
		}
	}
	if _, r := autoStats(t, hs.URL, "GET /delay1ms"); r.Heavy || r.Requests != 3 {
		t.Errorf("/delay1ms: got %+v, want light, 3 requests", r)
	}
}

// TestAutoOff: without Config.Auto, /stats has no auto_routes and sched=1
// still runs its own task.
func TestAutoOff(t *testing.T) {
	_, hs := newTestServer(t, Config{Workers: 1})
	code, h, _ := get(t, "GET", hs.URL+"/checksum?n=2&sched=1")
	if code != http.StatusOK || h.Get(WaitedHeader) == "" {
		t.Errorf("sched=1: got %d with %s %q, want 200 with the header", code, WaitedHeader, h.Get(WaitedHeader))
	}
	_, _, body := get(t, "GET", hs.URL+"/stats")
	if strings.Contains(body, "auto_routes") {
		t.Errorf("/stats without Auto has auto_routes:\n%s", body)
	}
}

// BenchmarkChecksumDirect measures the direct path's passes (100 per op)
// with a Checkpoint after each on a nil task, as outside Auto's tasks,
// against the same passes without: the call is a nil test beside a
// 256 KiB CRC32.
func BenchmarkChecksumDirect(b *testing.B) {
	s, err := NewServer(Config{Workers: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	const n = 100
	for _, checkpoint := range []bool{false, true} {
		b.Run(fmt.Sprintf("checkpoint=%t", checkpoint), func(b *testing.B) {
			b.SetBytes(n * BufferSize)
			ctx := context.Background()
			for b.Loop() {
				s.checksumDirect(ctx, nil, n, checkpoint, nil)
			}
		})
	}
}
