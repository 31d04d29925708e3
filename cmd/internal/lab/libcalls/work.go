// The heavy work: one library call per request, which cannot call
// Checkpoint.

package libcalls

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"math/rand/v2"

	"golang.org/x/crypto/bcrypt"
)

// The kinds of heavy work, by name.
const (
	KindGzip   = "gzip"
	KindBcrypt = "bcrypt"
)

// Kinds are the valid kinds, in the order tables list them.
var Kinds = []string{KindGzip, KindBcrypt}

// PayloadSize is the size of what a gzip request compresses: 2 MiB.
const PayloadSize = 2 << 20

// Limits of the bcrypt cost (Config.Cost, -cost). bcrypt doubles its work
// per step; below 4 the library refuses, above 16 one hash takes seconds
// here, longer than a step's window.
const (
	MinCost = bcrypt.MinCost
	MaxCost = 16
)

// Payload returns what every gzip request compresses: PayloadSize bytes of
// log lines drawn from a fixed seed, which BestCompression shrinks about
// 5:1, as it does a service's JSON or logs.
func Payload() []byte {
	r := rand.New(rand.NewPCG(1, 2))
	levels := []string{"info", "warn", "error"}
	methods := []string{"GET", "POST"}
	paths := []string{"users", "orders", "items", "search", "checkout", "status"}
	cache := []string{"hit", "miss", "stale"}
	var b bytes.Buffer
	b.Grow(PayloadSize + 256)
	for b.Len() < PayloadSize {
		fmt.Fprintf(&b, "ts=%d level=%s method=%s path=/%s/%d status=%d bytes=%d dur=%dus cache=%s\n",
			1_700_000_000_000+r.IntN(1e9), levels[r.IntN(len(levels))], methods[r.IntN(len(methods))],
			paths[r.IntN(len(paths))], r.IntN(100_000), 200+100*r.IntN(4), r.IntN(1<<16), r.IntN(1e6),
			cache[r.IntN(len(cache))])
	}
	return b.Bytes()[:PayloadSize]
}

// worker runs the heavy call of each kind.
type worker struct {
	payload []byte
	cost    int
}

// do runs one call of kind and returns a line that depends on its result.
// Neither call can yield: compress/gzip and bcrypt run to their end.
func (w worker) do(kind string) (string, error) {
	switch kind {
	case KindGzip:
		n, err := compress(w.payload)
		return fmt.Sprintf("gzip %d -> %d bytes\n", len(w.payload), n), err
	case KindBcrypt:
		hash, err := bcrypt.GenerateFromPassword([]byte("correct horse battery staple"), w.cost)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("bcrypt %s\n", hash), nil
	}
	return "", fmt.Errorf("unknown kind %q (valid: %s, %s)", kind, KindGzip, KindBcrypt)
}

// compress gzips p at BestCompression, as a service compresses a response,
// and returns the compressed size.
func compress(p []byte) (int64, error) {
	var n countingWriter
	zw, err := gzip.NewWriterLevel(&n, gzip.BestCompression)
	if err != nil {
		return 0, err
	}
	if _, err := zw.Write(p); err != nil {
		return 0, err
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	return int64(n), nil
}

// countingWriter counts what is written to it and keeps nothing.
type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}
