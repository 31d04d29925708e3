// The garbage the server makes (Config.Garbage): a response buffer per
// fast request, and a little in the CRC32 work, so that the collector runs
// as it does in a server that allocates.

package demo

import (
	"fmt"
	"hash/crc32"
	"sync/atomic"
)

// The server's garbage.
const (
	// DefaultGarbage is the response buffer a fast request builds in
	// `cpusched serve` unless told otherwise: 32 KiB, as the /ping of
	// an independent check's server, so that under the bench's load the
	// collector runs every few ms.
	DefaultGarbage = 32 << 10
	// HeavyGarbage is the buffer of serve's and bench's -gc: BufferSize,
	// the collector always busy.
	HeavyGarbage = BufferSize
	// MaxGarbage bounds Config.Garbage.
	MaxGarbage = 4 << 20
	// TaskGarbage bytes are allocated every TaskGarbageEvery CRC32 passes,
	// direct or as a task, when Config.Garbage is not 0: the CPU-heavy
	// work allocates a little too (8 KiB per 16 MiB read).
	TaskGarbage      = 8 << 10
	TaskGarbageEvery = 64
)

// CheckGarbage reports whether bytes is a valid Config.Garbage; its error
// gives the range, for the caller to prefix with the field or flag.
func CheckGarbage(bytes int) error {
	if bytes < 0 || bytes > MaxGarbage {
		return fmt.Errorf("must be in 0..%d bytes (0: no garbage), got %d", MaxGarbage, bytes)
	}
	return nil
}

// buildResponse builds the response buffer of a fast request: n bytes
// filled with line over and over (copy doubling, at memmove's speed), and
// returns its CRC32, which the request answers instead of the buffer. The
// buffer, whose size is not a constant, is allocated on the heap and left
// to the collector. For 32 KiB: about 4 us to fill and sum in cache,
// 30-40 us with the allocation and the collector's share of it
// (BenchmarkBuildResponse on the project's busy 2-vCPU machine, whose
// allocation alone took 11-20 us).
func buildResponse(n int, line string) uint32 {
	b := make([]byte, n)
	k := copy(b, line)
	for k > 0 && k < n {
		k += copy(b[k:], b[:k])
	}
	return crc32.ChecksumIEEE(b)
}

// taskGarbageSink keeps the last task garbage buffer reachable, so that
// the allocation happens on the heap, every time.
var taskGarbageSink atomic.Pointer[[]byte]

// taskGarbage allocates TaskGarbage bytes, fills them from src and leaves
// them to the collector.
func taskGarbage(src []byte) {
	b := make([]byte, TaskGarbage)
	copy(b, src)
	taskGarbageSink.Store(&b)
}

// passDone counts one CRC32 pass of the n-th (1-based) in a request, and
// makes the task garbage every TaskGarbageEvery passes when the server
// makes garbage.
func (s *Server) passDone(counter *atomic.Uint64, n int) {
	counter.Add(1)
	if s.cfg.Garbage > 0 && n%TaskGarbageEvery == 0 {
		taskGarbage(s.buf)
	}
}
