package soak

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/cmd/internal/demo"
)

// OutcomeCancelled is the outcome of a request that the soak cancelled on
// purpose before its answer came (the status codes are the other outcomes).
const OutcomeCancelled = "cancelled"

// requestCase is one kind of request of the mix: what to send and which
// outcomes are right.
type requestCase struct {
	name   string // how the counts and failures name it
	method string
	// target returns the path and query of one request; seq numbers the
	// requests of this case from 0.
	target func(r *rand.Rand, seq int64) string
	want   []string // expected outcomes: status codes ("200") or OutcomeCancelled
	weight int      // requests per cycle of the mix
	// cancelAfter, if positive, cancels the request after a random time in
	// [cancelAfter, 2*cancelAfter): while the server computes, sleeps or
	// queues it.
	cancelAfter time.Duration
	// burst is how many requests of the case go out at once (0 means 1).
	burst int
}

// Passes of the mix's checksums: small, so that a request costs at most
// about a millisecond of CPU, except for the cancelled ones, which would
// run for about a second if the server did not stop them.
const (
	maxLightPasses  = 200
	cancelledPasses = 200_000
	groupPasses     = 20
	cancelAfter     = 5 * time.Millisecond
	cancelledDelay  = 5 * time.Second
)

// classNames are every scheduling class's query name.
var classNames = func() []string {
	var names []string
	for c := cpusched.ClassNormal; ; c++ {
		if _, err := cpusched.ParseClass(c.String()); err != nil {
			return names
		}
		names = append(names, c.String())
	}
}()

func fixed(target string) func(*rand.Rand, int64) string {
	return func(*rand.Rand, int64) string { return target }
}

func lightPasses(r *rand.Rand) int { return 1 + r.IntN(maxLightPasses) }

// mixCases is the mix of every endpoint, bad parameters and cancelled
// requests; one cycle of it is the cases repeated by weight (see cycle).
// The cancelled scheduled checksums go out queueBurst at a time, so that
// with queueBurst above the server's worker count some are cancelled while
// they wait in the queue and the others while they run.
func mixCases(queueBurst int) []requestCase {
	ok, bad, notFound, badMethod := []string{"200"}, []string{"400"}, []string{"404"}, []string{"405"}
	cancelled := []string{OutcomeCancelled, "200"}
	return []requestCase{
		// Every endpoint, with valid parameters.
		{name: "GET /delay1ms", target: fixed("/delay1ms"), want: ok, weight: 4},
		{name: "HEAD /delay1ms", method: http.MethodHead, target: fixed("/delay1ms"), want: ok, weight: 1},
		{name: "GET /delay?d=100us..5ms", want: ok, weight: 2, target: func(r *rand.Rand, _ int64) string {
			return "/delay?d=" + (time.Duration(100+r.IntN(4900)) * time.Microsecond).String()
		}},
		{name: "GET /checksum?sched=0", want: ok, weight: 2, target: func(r *rand.Rand, _ int64) string {
			return fmt.Sprintf("/checksum?sched=0&n=%d", lightPasses(r))
		}},
		{name: "GET /checksum?sched=1", want: ok, weight: 2, target: func(r *rand.Rand, _ int64) string {
			return fmt.Sprintf("/checksum?sched=1&n=%d", lightPasses(r))
		}},
		{name: "GET /checksum?sched=1&class&nice&group", want: ok, weight: 4, target: func(r *rand.Rand, seq int64) string {
			return fmt.Sprintf("/checksum?sched=1&n=%d&class=%s&nice=%d&group=%s", lightPasses(r),
				classNames[seq%int64(len(classNames))], cpusched.MinNice+r.IntN(cpusched.MaxNice-cpusched.MinNice+1),
				[]string{"a", "b", ""}[seq%3])
		}},
		{name: "GET /checksumWithoutCpuWorker", want: ok, weight: 1, target: func(r *rand.Rand, _ int64) string {
			return fmt.Sprintf("/checksumWithoutCpuWorker?n=%d", lightPasses(r))
		}},
		{name: "GET /checksumWithCpuWorker", want: ok, weight: 1, target: func(r *rand.Rand, _ int64) string {
			return fmt.Sprintf("/checksumWithCpuWorker?n=%d", lightPasses(r))
		}},
		{name: "GET /checksumSmallTaskWithCpuWorker", target: fixed("/checksumSmallTaskWithCpuWorker"), want: ok, weight: 1},
		{name: "GET /stats", target: fixed("/stats"), want: ok, weight: 1},
		{name: "GET /metrics", target: fixed("/metrics"), want: ok, weight: 1},
		{name: "GET /debug/pprof/", target: fixed("/debug/pprof/"), want: ok, weight: 1},

		// Bad parameters, paths and methods.
		{name: "bad n=0", target: fixed("/checksum?n=0"), want: bad, weight: 1},
		{name: "bad n=abc", target: fixed("/checksum?sched=1&n=abc"), want: bad, weight: 1},
		{name: "bad n=1000001", target: fixed("/checksumWithCpuWorker?n=" + strconv.Itoa(demo.MaxPasses+1)), want: bad, weight: 1},
		{name: "bad sched=2", target: fixed("/checksum?sched=2&n=1"), want: bad, weight: 1},
		{name: "bad class=bogus", target: fixed("/checksum?sched=1&n=1&class=bogus"), want: bad, weight: 1},
		{name: "bad nice=99", target: fixed("/checksum?sched=1&n=1&nice=99"), want: bad, weight: 1},
		{name: "bad group of 300 bytes", target: fixed("/checksum?sched=1&n=1&group=" + strings.Repeat("g", 300)), want: bad, weight: 1},
		{name: "bad d=-1", target: fixed("/delay?d=-1"), want: bad, weight: 1},
		{name: "bad d=abc", target: fixed("/delay?d=abc"), want: bad, weight: 1},
		{name: "unknown path", target: fixed("/no/such/path"), want: notFound, weight: 1},
		{name: "POST /checksum", method: http.MethodPost, target: fixed("/checksum?n=1"), want: badMethod, weight: 1},
		{name: "DELETE /stats", method: http.MethodDelete, target: fixed("/stats"), want: badMethod, weight: 1},
		{name: "PUT /delay1ms", method: http.MethodPut, target: fixed("/delay1ms"), want: badMethod, weight: 1},

		// Requests whose client gives up while the server works on them.
		{name: "cancelled /checksum?sched=0", want: cancelled, weight: 1, cancelAfter: cancelAfter,
			target: fixed(fmt.Sprintf("/checksum?sched=0&n=%d", cancelledPasses))},
		{name: "cancelled /checksum?sched=1", want: cancelled, weight: 1, cancelAfter: cancelAfter, burst: queueBurst,
			target: func(_ *rand.Rand, seq int64) string {
				return fmt.Sprintf("/checksum?sched=1&n=%d&class=%s", cancelledPasses, classNames[seq%int64(len(classNames))])
			}},
		{name: "cancelled /delay?d=5s", want: cancelled, weight: 1, cancelAfter: cancelAfter,
			target: fixed("/delay?d=" + cancelledDelay.String())},
	}
}

// distinctGroupCase is the request that leaked: a task in a group no other
// request names. runID keeps the names of two runs apart.
func distinctGroupCase(runID string) requestCase {
	return requestCase{
		name: "GET /checksum?sched=1&group=<distinct>", want: []string{"200"}, weight: 1,
		target: func(r *rand.Rand, seq int64) string {
			return fmt.Sprintf("/checksum?sched=1&n=%d&group=soak-%s-%d", 1+r.IntN(groupPasses), runID, seq)
		},
	}
}

// cycle expands cases by weight into the order one cycle sends them in,
// spreading each case's requests over the cycle (a case of weight w comes
// every len/w requests) rather than in a burst.
func cycle(cases []requestCase) []int {
	type slot struct {
		at   float64
		card int
	}
	var slots []slot
	for i, c := range cases {
		for k := range c.weight {
			slots = append(slots, slot{at: (float64(k) + float64(i)/float64(len(cases))) / float64(c.weight), card: i})
		}
	}
	slices.SortStableFunc(slots, func(a, b slot) int { return cmp.Compare(a.at, b.at) })
	order := make([]int, len(slots))
	for i, s := range slots {
		order[i] = s.card
	}
	return order
}

// wanted reports whether outcome is one of c's expected outcomes.
func (c requestCase) wanted(outcome string) bool { return slices.Contains(c.want, outcome) }
