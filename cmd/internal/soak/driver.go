package soak

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// requestTimeout bounds one request of the mix: far above what any of them
// takes on a healthy server, so that reaching it is a finding.
const requestTimeout = 30 * time.Second

// maxExamples bounds the unexpected outcomes a report keeps in full.
const maxExamples = 20

// errPlannedCancel is the cause of a cancellation the mix asked for.
var errPlannedCancel = errors.New("soak: cancelled on purpose")

// stream sends the requests of order (indices into driver.cases), cycling,
// at a steady rate with at most conc in flight.
type stream struct {
	order []int
	rate  float64
	conc  int
	seed  uint64
}

// driver sends the mix to one server and counts the outcomes.
type driver struct {
	base   string
	client *http.Client
	cases  []requestCase
	done   atomic.Int64 // requests finished with an outcome

	mu         sync.Mutex
	counts     []map[string]int64 // per case, by outcome
	unexpected int64
	examples   []Unexpected
}

// Unexpected is a request whose outcome was not one its case expects.
type Unexpected struct {
	Case    string  `json:"case"`
	Method  string  `json:"method"`
	Target  string  `json:"target"`
	Outcome string  `json:"outcome"`        // status code, OutcomeCancelled or "error: ..."
	Detail  string  `json:"detail"`         // the start of the body, or the error
	AtS     float64 `json:"at_s,omitempty"` // seconds since the load started
}

func newDriver(base string, cases []requestCase, conns int) *driver {
	d := &driver{
		base:   base,
		cases:  cases,
		counts: make([]map[string]int64, len(cases)),
		client: &http.Client{
			Transport: &http.Transport{
				Proxy:               nil,
				DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
				MaxIdleConns:        conns,
				MaxIdleConnsPerHost: conns,
				IdleConnTimeout:     30 * time.Second,
				DisableCompression:  true,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	for i := range d.counts {
		d.counts[i] = map[string]int64{}
	}
	return d
}

// close closes the driver's idle connections.
func (d *driver) close() { d.client.CloseIdleConnections() }

// run sends s's requests until ctx ends, then waits for those in flight
// (ctx's end cancels them; they are not counted). start is the load's
// start, for the examples' times.
func (d *driver) run(ctx context.Context, s stream, start time.Time) {
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	slots := make(chan struct{}, s.conc)
	rng := rand.New(rand.NewPCG(s.seed, 0x50a4))
	seq := make([]int64, len(d.cases))
	interval := time.Duration(float64(time.Second) / s.rate)
	timer := time.NewTimer(0)
	defer timer.Stop()
	next := time.Now()
	for i := 0; ; i++ {
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		ci := s.order[i%len(s.order)]
		c := d.cases[ci]
		burst := max(1, c.burst)
		for range burst {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			target := c.target(rng, seq[ci])
			seq[ci]++
			var cancelIn time.Duration
			if c.cancelAfter > 0 {
				cancelIn = c.cancelAfter + rand.N(c.cancelAfter)
			}
			inFlight.Add(1)
			go func() {
				defer inFlight.Done()
				defer func() { <-slots }()
				d.do(ctx, ci, target, cancelIn, start)
			}()
		}
		// A steady rate: a dispatcher that fell behind (every slot busy)
		// does not catch up in a burst.
		next = next.Add(interval)
		if now := time.Now(); next.Before(now.Add(-interval)) {
			next = now
		}
	}
}

// do sends one request of case ci and records its outcome, unless ctx (the
// run) ended first.
func (d *driver) do(ctx context.Context, ci int, target string, cancelIn time.Duration, start time.Time) {
	c := d.cases[ci]
	reqCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	reqCtx, cancelTimeout := context.WithTimeout(reqCtx, requestTimeout)
	defer cancelTimeout()
	if cancelIn > 0 {
		t := time.AfterFunc(cancelIn, func() { cancel(errPlannedCancel) })
		defer t.Stop()
	}
	method := c.method
	if method == "" {
		method = http.MethodGet
	}
	outcome, detail := "", ""
	req, err := http.NewRequestWithContext(reqCtx, method, d.base+target, nil)
	if err == nil {
		var resp *http.Response
		if resp, err = d.client.Do(req); err == nil {
			head := make([]byte, 200)
			n, _ := io.ReadFull(resp.Body, head)
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			outcome, detail = strconv.Itoa(resp.StatusCode), string(head[:n])
		}
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return // the run ended: neither right nor wrong
		case errors.Is(context.Cause(reqCtx), errPlannedCancel):
			outcome, detail = OutcomeCancelled, ""
		default:
			outcome, detail = "error: "+errorKind(err), err.Error()
		}
	}
	d.done.Add(1)
	d.record(ci, method, target, outcome, detail, time.Since(start))
}

// errorKind names a transport failure briefly, for the counts.
func errorKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection closed"
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Op
	}
	return "other"
}

func (d *driver) record(ci int, method, target, outcome, detail string, at time.Duration) {
	c := d.cases[ci]
	d.mu.Lock()
	defer d.mu.Unlock()
	d.counts[ci][outcome]++
	if c.wanted(outcome) {
		return
	}
	d.unexpected++
	if len(d.examples) < maxExamples {
		if len(target) > 120 {
			target = target[:120] + "..."
		}
		d.examples = append(d.examples, Unexpected{
			Case: c.name, Method: method, Target: target, Outcome: outcome, Detail: detail, AtS: at.Seconds(),
		})
	}
}

// tally returns the counts per case, the unexpected outcomes' total and the
// kept examples.
func (d *driver) tally() ([]CaseCount, int64, []Unexpected) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]CaseCount, len(d.cases))
	for i, c := range d.cases {
		counts := make(map[string]int64, len(d.counts[i]))
		for k, v := range d.counts[i] {
			counts[k] = v
		}
		out[i] = CaseCount{Case: c.name, Want: c.want, Counts: counts}
	}
	return out, d.unexpected, append([]Unexpected(nil), d.examples...)
}

// CaseCount is how one case of the mix was answered.
type CaseCount struct {
	Case   string           `json:"case"`
	Want   []string         `json:"want"`   // the expected outcomes
	Counts map[string]int64 `json:"counts"` // by outcome: status code, "cancelled" or "error: ..."
}

// unexpectedSoFar returns the number of unexpected outcomes so far.
func (d *driver) unexpectedSoFar() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.unexpected
}
