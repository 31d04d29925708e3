package demo

import (
	"fmt"
	"hash/crc32"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// heapAllocs is the bytes allocated on the heap since the program
// started. runtime.ReadMemStats, not runtime/metrics: it flushes every P's
// cached counts, where /gc/heap/allocs:bytes counts a small object only
// once its span is handed back (a regression test read 32,344 bytes for
// four 8 KiB buffers).
func heapAllocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// TestGarbageAllocates: a fast request builds its response buffer of
// Config.Garbage bytes on the heap, and the CRC32 work allocates
// TaskGarbage bytes every TaskGarbageEvery passes, direct and as a task;
// with no garbage, neither does.
func TestGarbageAllocates(t *testing.T) {
	const requests = 8
	passes := 4 * TaskGarbageEvery
	tests := []struct {
		name     string
		garbage  int
		path     string
		per      int    // requests
		min, max uint64 // bytes per request
	}{
		{"default /delay", DefaultGarbage, "/delay?d=1us", requests, DefaultGarbage, DefaultGarbage + 16<<10},
		{"heavy /delay1ms", HeavyGarbage, "/delay1ms", requests, HeavyGarbage, HeavyGarbage + 16<<10},
		{"none /delay", 0, "/delay?d=1us", requests, 0, 16 << 10},
		{"default direct passes", DefaultGarbage, fmt.Sprintf("/checksum?n=%d", passes), 2, 4 * TaskGarbage, 4*TaskGarbage + 16<<10},
		{"default task passes", DefaultGarbage, fmt.Sprintf("/checksum?n=%d&sched=1", passes), 2, 4 * TaskGarbage, 4*TaskGarbage + 16<<10},
		{"none task passes", 0, fmt.Sprintf("/checksum?n=%d&sched=1", passes), 2, 0, 16 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, hs := newTestServer(t, Config{Workers: 1, Garbage: tt.garbage})
			get(t, "GET", hs.URL+tt.path) // warm the connection up
			before := heapAllocs()
			for range tt.per {
				get(t, "GET", hs.URL+tt.path)
			}
			per := (heapAllocs() - before) / uint64(tt.per)
			if per < tt.min || per > tt.max {
				t.Errorf("got %d bytes allocated per request, want %d..%d", per, tt.min, tt.max)
			}
		})
	}
}

// TestGarbageResponse: with garbage, a fast request answers its buffer's
// CRC32, one length for every request of a path.
func TestGarbageResponse(t *testing.T) {
	_, hs := newTestServer(t, Config{Workers: 1, Garbage: 100})
	line := "delayed 1ms\n"
	want := fmt.Sprintf("delayed 1ms, built 100 bytes, crc %08x\n", crc32.ChecksumIEEE([]byte(strings.Repeat(line, 10)[:100])))
	for _, path := range []string{"/delay1ms", "/delay?d=1ms"} {
		if code, _, body := get(t, "GET", hs.URL+path); code != http.StatusOK || body != want {
			t.Errorf("%s: got %d %q, want 200 %q", path, code, body, want)
		}
	}
}

func TestCheckGarbage(t *testing.T) {
	for _, tt := range []struct {
		bytes   int
		wantErr string
	}{
		{0, ""}, {1, ""}, {DefaultGarbage, ""}, {HeavyGarbage, ""}, {MaxGarbage, ""},
		{-1, "must be in 0..4194304 bytes (0: no garbage), got -1"},
		{MaxGarbage + 1, "must be in 0..4194304 bytes (0: no garbage), got 4194305"},
	} {
		err := CheckGarbage(tt.bytes)
		if got := fmt.Sprint(err); tt.wantErr == "" && err != nil || tt.wantErr != "" && got != tt.wantErr {
			t.Errorf("CheckGarbage(%d): got %v, want %q", tt.bytes, err, tt.wantErr)
		}
	}
	if _, err := NewServer(Config{Garbage: -1}); err == nil || !strings.Contains(err.Error(), "demo: Garbage must be in 0..") {
		t.Errorf("NewServer(Garbage -1): got %v, want an error naming Garbage and its range", err)
	}
}

// BenchmarkBuildResponse is a fast request's garbage at the default size,
// beside its baseline: the allocation alone, unfilled.
func BenchmarkBuildResponse(b *testing.B) {
	b.Run("build", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buildResponse(DefaultGarbage, "delayed 1ms\n")
		}
	})
	b.Run("baseline=alloc", func(b *testing.B) {
		b.ReportAllocs()
		n := DefaultGarbage
		for b.Loop() {
			buf := make([]byte, n)
			taskGarbageSink.Store(&buf)
		}
	})
}
