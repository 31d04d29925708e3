// Package load drives an HTTP URL with closed- or open-loop load and records
// response latency in HDR histograms.
//
// Closed loop (Rate == 0): Concurrency workers each send a request, wait for
// the whole response, and send the next, until Requests have been sent or
// Duration has passed. Latency is measured from the moment a request is sent.
//
// Open loop (Rate > 0): requests fall due on a fixed schedule, request i at
// start + i/Rate, for Duration. Concurrency workers take due requests in
// order; a worker that is free early sleeps until its request is due, and when
// every worker is busy the due requests wait. Latency is measured from the
// time a request was due, not from when it was sent, so a stalled server is
// charged for the requests it kept from being sent (the "coordinated
// omission" correction of wrk2). Taking tickets from one shared counter gives
// the same schedule as a separate pacer goroutine feeding a queue, without the
// queue.
//
// Cost: each request costs the client more CPU than wrk's C event loop, so
// against the same loopback server Run reaches somewhat less than wrk's
// rate (docs/performance.md#tools).
//
// Load tests are for loopback only: Validate refuses a URL whose host is not a
// loopback address unless AllowRemote is set, and the client that Run builds
// refuses, at dial time, to connect anywhere but loopback (so a name that
// resolves differently later, or a redirect, cannot escape the check).
package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency histogram geometry: microseconds from 1us to 60s with 3
// significant digits. One such histogram takes about 140 KB.
const (
	latencyMinUs   = 1
	latencyMaxUs   = 60_000_000
	latencySigFigs = 3
)

// maxShards bounds the number of latency histograms. Up to maxShards workers
// each get their own histogram (and lock it uncontended); beyond that, workers
// share them round-robin, so that -c 10000 costs 9 MB of histograms, not 1.4 GB.
const maxShards = 64

// Failure kinds, the keys of Result.Failed and Summary.FailedByKind.
const (
	FailConnect = "connect" // the TCP (or TLS) connection could not be made
	FailTimeout = "timeout" // no complete response within Config.Timeout
	FailRead    = "read"    // the connection broke while reading the response
	FailOther   = "other"   // anything else
)

// failKinds lists the failure kinds in the order they are reported.
var failKinds = [...]string{FailConnect, FailTimeout, FailRead, FailOther}

// progressInterval is how often Run writes its progress line; tests shorten it.
var progressInterval = time.Second

// Run validates cfg and drives cfg.URL until cfg.Requests have been sent or
// cfg.Duration has passed, then returns the merged result. It returns early
// when ctx is cancelled: then it returns the partial result together with
// ctx.Err(). Requests still in flight when the run stops are abandoned and
// counted in Result.Unfinished, not in Completed or Failed. An invalid cfg
// returns (nil, error) and sends nothing. Run closes the idle connections of
// the client it builds; a caller-supplied Client is left as it is.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	method := cfg.Method
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequest(method, cfg.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("load: URL: %w", err)
	}
	if cfg.Body != nil {
		// Each request gets a reader of its own (do); the length and
		// GetBody, which the transport uses to resend on a connection
		// that closed, are the template's.
		req.ContentLength = int64(len(cfg.Body))
		req.GetBody = func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(cfg.Body)), nil
		}
	}
	req.Header.Set("User-Agent", "cpusched-load")
	withHeader(req, cfg.Header)
	client := cfg.Client
	if client == nil {
		var tr *http.Transport
		client, tr = newClient(cfg)
		defer tr.CloseIdleConnections()
	}

	r := &runner{cfg: cfg, client: client, req: req}
	nShards := min(cfg.Concurrency, maxShards)
	r.shards = make([]*shard, nShards)
	for i := range r.shards {
		r.shards[i] = &shard{
			hist:     hdrhistogram.New(latencyMinUs, latencyMaxUs, latencySigFigs),
			statuses: make(map[int]int64),
		}
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	r.start = time.Now()
	if cfg.Duration > 0 && !cfg.Drain {
		// With Drain the open-loop workers stop by themselves once the
		// schedule passes Duration.
		t := time.AfterFunc(cfg.Duration, stop)
		defer t.Stop()
	}
	progressDone := make(chan struct{})
	var progressWG sync.WaitGroup
	if cfg.Progress != nil {
		progressWG.Add(1)
		go func() {
			defer progressWG.Done()
			r.progress(cfg.Progress, progressDone)
		}()
	}
	var wg sync.WaitGroup
	for i := range cfg.Concurrency {
		s := r.shards[i%nShards]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cfg.Rate > 0 {
				r.openLoop(runCtx, s)
			} else {
				r.closedLoop(runCtx, s)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(r.start)
	close(progressDone)
	progressWG.Wait()

	if cfg.Duration > 0 && elapsed > cfg.Duration {
		// Requests cut off at the deadline are not counted, so neither is
		// the time spent abandoning them; with Drain, the requests counted
		// are those due within Duration.
		elapsed = cfg.Duration
	}
	res := r.result(elapsed)
	return res, ctx.Err()
}

// runner is the state of one Run shared by its workers.
type runner struct {
	cfg    Config
	client *http.Client
	req    *http.Request // template; each request is req.WithContext
	start  time.Time
	shards []*shard

	issued    atomic.Int64 // closed loop with Requests: requests taken
	ticket    atomic.Int64 // open loop: next due request
	completed atomic.Int64 // for the progress line
	failed    atomic.Int64 // for the progress line
}

// shard holds the counts of one or more workers; mu is uncontended when a
// shard has a single worker.
type shard struct {
	mu         sync.Mutex
	hist       *hdrhistogram.Histogram
	completed  int64
	non2xx     int64
	bytes      int64
	aborted    int64
	failed     [len(failKinds)]int64
	statuses   map[int]int64
	overflowed int64 // latencies above the histogram's range, recorded as its max
}

// do sends one request, reads the whole body and records the outcome in s,
// with latency measured from `from`.
func (r *runner) do(runCtx context.Context, s *shard, from time.Time) {
	ctx, cancel := context.WithTimeout(runCtx, r.cfg.Timeout)
	defer cancel()
	sent := time.Now()
	req := r.req.WithContext(ctx)
	if r.cfg.Body != nil {
		req.Body = io.NopCloser(bytes.NewReader(r.cfg.Body))
	}
	resp, err := r.client.Do(req)
	if err != nil {
		r.fail(runCtx, s, err, false, 0)
		return
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		r.fail(runCtx, s, err, true, n)
		return
	}
	done := time.Now()
	latency := done.Sub(from)
	us := latency.Microseconds()
	r.completed.Add(1)
	if r.cfg.OnResponse != nil {
		r.cfg.OnResponse(Response{Header: resp.Header, Latency: latency, Sent: sent, Done: done})
	}

	s.mu.Lock()
	if us > latencyMaxUs {
		us = latencyMaxUs
		s.overflowed++
	}
	_ = s.hist.RecordValue(us) // in range by construction
	s.completed++
	s.bytes += n
	s.statuses[resp.StatusCode]++
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		s.non2xx++
	}
	s.mu.Unlock()
}

// fail records a request that got no complete response. A request cut off
// because the run stopped is counted as aborted, not as a failure.
func (r *runner) fail(runCtx context.Context, s *shard, err error, reading bool, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bytes += n
	if runCtx.Err() != nil {
		s.aborted++
		return
	}
	r.failed.Add(1)
	s.failed[kindIndex(classify(err, reading))]++
}

// classify names the kind of a transport error; reading is true when the
// response headers had arrived and the body was being read.
func classify(err error, reading bool) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return FailTimeout
	}
	var op *net.OpError
	isOp := errors.As(err, &op)
	if isOp && op.Op == "dial" || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, ErrNotLoopback) {
		return FailConnect
	}
	if reading || isOp && op.Op == "read" ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return FailRead
	}
	return FailOther
}

// kindIndex returns the index of a failure kind in failKinds (an unknown
// kind counts as FailOther, the last).
func kindIndex(kind string) int {
	for i, k := range failKinds {
		if k == kind {
			return i
		}
	}
	return len(failKinds) - 1
}

// progress writes a progress line every progressInterval until done closes,
// then ends the line.
func (r *runner) progress(w io.Writer, done <-chan struct{}) {
	t := time.NewTicker(progressInterval)
	defer t.Stop()
	var last int64
	wrote := false
	for {
		select {
		case <-done:
			if wrote {
				fmt.Fprintln(w)
			}
			return
		case now := <-t.C:
			c, f := r.completed.Load(), r.failed.Load()
			fmt.Fprintf(w, "\r%7.1fs %10d completed %8d failed %10.0f req/s  ",
				now.Sub(r.start).Seconds(), c, f, float64(c-last)/progressInterval.Seconds())
			last = c
			wrote = true
		}
	}
}

// result merges the shards into a Result.
func (r *runner) result(elapsed time.Duration) *Result {
	res := &Result{
		Failed:      make(map[string]int64, len(failKinds)),
		StatusCodes: make(map[int]int64),
		Elapsed:     elapsed,
		Latency:     hdrhistogram.New(latencyMinUs, latencyMaxUs, latencySigFigs),
	}
	for _, k := range failKinds {
		res.Failed[k] = 0
	}
	var aborted, failed int64
	for _, s := range r.shards {
		s.mu.Lock()
		res.Completed += s.completed
		res.Non2xx += s.non2xx
		res.Bytes += s.bytes
		res.Overflowed += s.overflowed
		aborted += s.aborted
		for i, k := range failKinds {
			res.Failed[k] += s.failed[i]
			failed += s.failed[i]
		}
		for code, n := range s.statuses {
			res.StatusCodes[code] += n
		}
		res.Latency.Merge(s.hist)
		s.mu.Unlock()
	}
	res.Unfinished = aborted
	if r.cfg.Rate > 0 {
		// Every request due before the run stopped and not finished: those
		// abandoned in flight and those never sent.
		due := dueBefore(min(elapsed, r.cfg.Duration), r.cfg.Rate)
		res.Unfinished = max(0, due-res.Completed-failed)
	}
	return res
}
