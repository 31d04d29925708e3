package load

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/cpusched/cpusched/cmd/internal/report"
)

// Result is the outcome of one Run, merged over all workers.
type Result struct {
	Completed   int64                   // responses received (any status)
	Failed      map[string]int64        // transport failures by kind: "connect", "timeout", "read", "other" (all four keys present)
	Non2xx      int64                   // responses with a status outside 200..299
	StatusCodes map[int]int64           // responses by status code
	Bytes       int64                   // response body bytes read
	Elapsed     time.Duration           // wall time of the run (at most Duration for a timed run)
	Latency     *hdrhistogram.Histogram // microseconds, successful and non-2xx responses

	// Unfinished counts requests that neither completed nor failed because
	// the run stopped (Duration passed or ctx was cancelled): those abandoned
	// in flight and, in open loop, those that were due but never sent. A
	// large number in open loop means the server fell behind the rate.
	Unfinished int64
	// Overflowed counts latencies above the histogram's 60 s range; they
	// are recorded as 60 s.
	Overflowed int64
}

// FailedTotal returns the number of transport failures of all kinds.
func (r *Result) FailedTotal() int64 {
	var n int64
	for _, v := range r.Failed {
		n += v
	}
	return n
}

// Summary is the JSON-ready form of a Result: counts, rates and latency
// percentiles in milliseconds.
type Summary struct {
	Completed    int64            `json:"completed"`
	Failed       int64            `json:"failed"`
	FailedByKind map[string]int64 `json:"failed_by_kind"`
	Non2xx       int64            `json:"non_2xx"`
	Unfinished   int64            `json:"unfinished"`
	RPS          float64          `json:"rps"`           // completed responses per second
	TransferKBps float64          `json:"transfer_kbps"` // response body KiB per second
	Elapsed      float64          `json:"elapsed_s"`     // seconds
	MinMs        float64          `json:"min_ms"`
	MeanMs       float64          `json:"mean_ms"`
	P50Ms        float64          `json:"p50_ms"`
	P90Ms        float64          `json:"p90_ms"`
	P99Ms        float64          `json:"p99_ms"`
	P999Ms       float64          `json:"p999_ms"`
	MaxMs        float64          `json:"max_ms"`
	StatusCodes  map[string]int64 `json:"status_codes"` // keyed by the decimal code, e.g. "200"
}

// Summary computes the numbers of r. Latency fields are 0 when no response
// completed; rates are 0 when Elapsed is 0.
func (r *Result) Summary() Summary {
	s := Summary{
		Completed:    r.Completed,
		Failed:       r.FailedTotal(),
		FailedByKind: make(map[string]int64, len(failKinds)),
		Non2xx:       r.Non2xx,
		Unfinished:   r.Unfinished,
		Elapsed:      r.Elapsed.Seconds(),
		StatusCodes:  make(map[string]int64, len(r.StatusCodes)),
	}
	for _, k := range failKinds {
		s.FailedByKind[k] = r.Failed[k]
	}
	for code, n := range r.StatusCodes {
		s.StatusCodes[strconv.Itoa(code)] = n
	}
	if sec := r.Elapsed.Seconds(); sec > 0 {
		s.RPS = float64(r.Completed) / sec
		s.TransferKBps = float64(r.Bytes) / 1024 / sec
	}
	if h := r.Latency; h != nil && h.TotalCount() > 0 {
		ms := func(us int64) float64 { return float64(us) / 1000 }
		s.MinMs = ms(h.Min())
		s.MeanMs = h.Mean() / 1000
		s.P50Ms = ms(h.ValueAtQuantile(50))
		s.P90Ms = ms(h.ValueAtQuantile(90))
		s.P99Ms = ms(h.ValueAtQuantile(99))
		s.P999Ms = ms(h.ValueAtQuantile(99.9))
		s.MaxMs = ms(h.Max())
	}
	return s
}

// WriteText writes the ab-like text summary of r to w and returns the first
// write error.
func (r *Result) WriteText(out io.Writer) error {
	s := r.Summary()
	ew := report.NewErrWriter(out)
	var w io.Writer = ew
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Time taken:\t%.3f s\n", s.Elapsed)
	fmt.Fprintf(tw, "Completed requests:\t%d\n", s.Completed)
	fmt.Fprintf(tw, "Failed requests:\t%d\t(connect %d, timeout %d, read %d, other %d)\n", s.Failed,
		s.FailedByKind[FailConnect], s.FailedByKind[FailTimeout], s.FailedByKind[FailRead], s.FailedByKind[FailOther])
	fmt.Fprintf(tw, "Non-2xx responses:\t%d\n", s.Non2xx)
	if s.Unfinished > 0 {
		fmt.Fprintf(tw, "Unfinished requests:\t%d\t(cut off or never sent when the run stopped)\n", s.Unfinished)
	}
	fmt.Fprintf(tw, "Requests per second:\t%.2f\t[#/sec]\n", s.RPS)
	fmt.Fprintf(tw, "Transfer rate:\t%.2f\t[Kbytes/sec] response bodies\n", s.TransferKBps)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Latency (ms):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  min\tmean\t50%%\t90%%\t99%%\t99.9%%\tmax\t\n")
	fmt.Fprintf(tw, "  %.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n",
		s.MinMs, s.MeanMs, s.P50Ms, s.P90Ms, s.P99Ms, s.P999Ms, s.MaxMs)
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Overflowed > 0 {
		fmt.Fprintf(w, "  (%d latencies above 60 s recorded as 60 s)\n", r.Overflowed)
	}
	if len(r.StatusCodes) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Status codes:")
		codes := make([]int, 0, len(r.StatusCodes))
		for c := range r.StatusCodes {
			codes = append(codes, c)
		}
		slices.Sort(codes)
		for _, c := range codes {
			fmt.Fprintf(w, "  %d  %d\n", c, r.StatusCodes[c])
		}
	}
	return ew.Err()
}
