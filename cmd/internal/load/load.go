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
// Cost: each request costs the client more CPU than wrk's C event loop;
// against a loopback server that sleeps 1 ms per request, at 8 connections,
// Run reached about nine tenths of wrk's rate (docs/performance.md, "Tools").
//
// Load tests are for loopback only: Validate refuses a URL whose host is not a
// loopback address unless AllowRemote is set, and the client that Run builds
// refuses, at dial time, to connect anywhere but loopback (so a name that
// resolves differently later, or a redirect, cannot escape the check).
package load

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/cpusched/cpusched/cmd/internal/hrsleep"
)

// Defaults and limits of Config.
const (
	// DefaultConcurrency is the -c default of the CLI.
	DefaultConcurrency = 10
	// MaxConcurrency is the largest Concurrency that Validate accepts.
	MaxConcurrency = 10000
	// MaxRate bounds Config.Rate (-rate), requests/s: far above what one
	// loopback server answers, low enough that every due time is exact.
	MaxRate = 1e6
	// DefaultTimeout is the per-request timeout used when Config.Timeout is 0.
	DefaultTimeout = 10 * time.Second
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

// ErrNotLoopback is returned (wrapped) by Validate, and by the dialer of the
// client Run builds, when the target is not a loopback address and
// Config.AllowRemote is false.
var ErrNotLoopback = errors.New("not a loopback address (127.0.0.0/8, ::1, localhost); load tests target loopback only unless AllowRemote (-allow-remote) is set")

// progressInterval is how often Run writes its progress line; tests shorten it.
var progressInterval = time.Second

// Config describes one load run. The zero value is not valid: URL,
// Concurrency and one of Requests or Duration are required.
type Config struct {
	URL         string        // http or https URL; its host must be loopback unless AllowRemote
	Method      string        // "" means GET
	Concurrency int           // closed loop: workers; open loop: max requests in flight; 1..MaxConcurrency
	Requests    int           // closed loop total; 0 means run for Duration
	Duration    time.Duration // required for open loop
	Rate        float64       // > 0: open loop at Rate requests/s
	Timeout     time.Duration // per request; 0 means 10s
	AllowRemote bool          // allow a non-loopback target
	Progress    io.Writer     // nil: no progress line; else one line a second, from one goroutine
	Client      *http.Client  // nil: one is built with keep-alive for Concurrency conns

	// Drain, in open loop, lets the requests due within Duration all be
	// sent and finish (each within Timeout) after Duration has passed,
	// instead of abandoning those still in flight or waiting for a worker.
	// The slowest requests are the ones in flight at the end, so without
	// Drain a stalled server's tail is understated. Elapsed (and so RPS)
	// still covers Duration, the window the requests fell due in. Drain
	// needs Rate > 0.
	Drain bool

	// OnResponse, if set, is called with each complete response (after
	// its body was read), from the goroutine that sent it: several at once
	// under concurrency, so it must be safe for that.
	OnResponse func(Response)

	// Insecure skips TLS certificate verification in the client Run builds
	// (for https on loopback with a self-signed certificate). It has no
	// effect when Client is set.
	Insecure bool
}

// Response is what Config.OnResponse learns of one complete response.
type Response struct {
	Header  http.Header
	Latency time.Duration // as recorded: from the due time in open loop, from Sent in closed loop
	Sent    time.Time     // when the request was handed to the HTTP client
	Done    time.Time     // when the whole body had been read
}

// Validate reports the first problem with c, as an error that names the field,
// its CLI flag and the valid range. It resolves the URL's host name (with a
// 5 s limit) to check that it is loopback, unless AllowRemote is set; an
// error from that check wraps ErrNotLoopback.
func (c Config) Validate() error {
	_, err := c.parseURL()
	if err != nil {
		return err
	}
	if c.Method != "" && !validMethod(c.Method) {
		return fmt.Errorf("load: Method (-m) %q is not a valid HTTP method token", c.Method)
	}
	if c.Concurrency < 1 || c.Concurrency > MaxConcurrency {
		return fmt.Errorf("load: Concurrency (-c) must be in 1..%d, got %d", MaxConcurrency, c.Concurrency)
	}
	if c.Requests < 0 {
		return fmt.Errorf("load: Requests (-n) must be >= 1 (or 0 to run for Duration), got %d", c.Requests)
	}
	if c.Duration < 0 {
		return fmt.Errorf("load: Duration (-d) must be > 0, got %v", c.Duration)
	}
	if c.Requests > 0 && c.Duration > 0 {
		return errors.New("load: give exactly one of Requests (-n) or Duration (-d), not both")
	}
	if c.Requests == 0 && c.Duration == 0 {
		return errors.New("load: give exactly one of Requests (-n >= 1) or Duration (-d > 0)")
	}
	if math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) || c.Rate < 0 || c.Rate > MaxRate {
		return fmt.Errorf("load: Rate (-rate) must be in (0, %g] requests/s (or 0 for closed loop), got %v", float64(MaxRate), c.Rate)
	}
	if c.Rate > 0 && c.Duration == 0 {
		return errors.New("load: Rate (-rate) needs Duration (-d > 0); open loop runs for a time, not a count")
	}
	if c.Drain && c.Rate == 0 {
		return errors.New("load: Drain needs Rate (-rate > 0); it applies to open loop only")
	}
	if c.Timeout < 0 {
		return fmt.Errorf("load: Timeout (-timeout) must be > 0 (or 0 for %v), got %v", DefaultTimeout, c.Timeout)
	}
	if !c.AllowRemote {
		if err := checkLoopback(c.URL); err != nil {
			return err
		}
	}
	return nil
}

// parseURL parses c.URL and checks its scheme and host.
func (c Config) parseURL() (*url.URL, error) {
	if c.URL == "" {
		return nil, errors.New("load: URL is required (an http:// or https:// URL)")
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, fmt.Errorf("load: URL: %w", err)
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return nil, fmt.Errorf("load: URL %q: scheme must be http or https, got %q", c.URL, u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("load: URL %q has no host", c.URL)
	}
	return u, nil
}

// checkLoopback returns an error wrapping ErrNotLoopback unless every address
// the URL's host resolves to is a loopback address.
func checkLoopback(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("load: URL: %w", err)
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil {
		if !ip.IsLoopback() {
			return fmt.Errorf("load: URL host %s is %w", host, ErrNotLoopback)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return fmt.Errorf("load: URL host %s does not resolve (%v), so it is %w", host, err, ErrNotLoopback)
	}
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			return fmt.Errorf("load: URL host %s resolves to %s, %w", host, a.IP, ErrNotLoopback)
		}
	}
	return nil
}

// validMethod reports whether m is an HTTP token (RFC 9110 section 5.6.2).
func validMethod(m string) bool {
	for i := 0; i < len(m); i++ {
		c := m[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return m != ""
}

// newClient builds the keep-alive client Run uses when Config.Client is nil:
// HTTP/1.1, one idle connection kept per worker, no compression (so Bytes is
// what came over the wire), no proxy, no redirects (a 3xx counts as non-2xx),
// and, unless AllowRemote, a dialer that refuses non-loopback addresses.
func newClient(c Config) (*http.Client, *http.Transport) {
	dialer := &net.Dialer{Timeout: c.Timeout, KeepAlive: 30 * time.Second}
	if !c.AllowRemote {
		dialer.Control = func(network, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return fmt.Errorf("load: refusing to dial %s: %w", address, ErrNotLoopback)
			}
			return nil
		}
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         dialer.DialContext,
		MaxIdleConns:        c.Concurrency,
		MaxIdleConnsPerHost: c.Concurrency,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: c.Timeout,
		DisableCompression:  true,
	}
	if c.Insecure {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // #nosec: opt-in, loopback test servers
	}
	client := &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return client, tr
}

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
	req.Header.Set("User-Agent", "cpusched-load")
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

// closedLoop sends one request after another until the run stops or the
// Requests budget is used up.
func (r *runner) closedLoop(ctx context.Context, s *shard) {
	for ctx.Err() == nil {
		if r.cfg.Requests > 0 && r.issued.Add(1) > int64(r.cfg.Requests) {
			return
		}
		r.do(ctx, s, time.Now())
	}
}

// dueOffset returns when request i of an open-loop run at rate falls due,
// relative to the start of the run. An offset beyond what a Duration holds
// (request 1 at 1e-10 requests/s) is the longest Duration, past any run's
// end: converted as it is, it would overflow to a negative offset, due at
// once.
func dueOffset(i int64, rate float64) time.Duration {
	d := float64(i) * float64(time.Second) / rate
	if d >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(d)
}

// dueBefore returns how many requests of an open-loop run at rate fall due
// before offset t, with the same rounding as openLoop; math.MaxInt64 when
// more do than an int64 counts (rates of about 1e18 requests/s and more).
func dueBefore(t time.Duration, rate float64) int64 {
	estimate := math.Ceil(t.Seconds() * rate)
	if estimate >= math.MaxInt64 {
		return math.MaxInt64
	}
	n := int64(estimate)
	for n > 0 && dueOffset(n-1, rate) >= t {
		n--
	}
	for n < math.MaxInt64 && dueOffset(n, rate) < t {
		n++
	}
	return n
}

// openLoop takes due requests in order from the shared schedule, waits until
// each is due, sends it and charges its latency from the due time.
func (r *runner) openLoop(ctx context.Context, s *shard) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		i := r.ticket.Add(1) - 1
		offset := dueOffset(i, r.cfg.Rate)
		if offset >= r.cfg.Duration {
			return
		}
		due := r.start.Add(offset)
		if !waitUntil(ctx, timer, due) {
			return
		}
		r.do(ctx, s, due)
	}
}

// waitUntil blocks until due and reports whether ctx is still live then.
//
// Go's timers wake up to about 1 ms late here (the netpoller waits in whole
// milliseconds), and since open-loop latency counts from the due time, that
// lateness would be charged to the server: a 1 ms endpoint measured twice that.
// So the timer only covers the wait down to hrsleep.Coarse before due (where
// ctx can still interrupt it), and the rest is slept with hrsleep.Sleep,
// which wakes within the timer slack (docs/performance.md, "Tools"). Spinning the last
// stretch would be more precise but burns CPU that the server under test
// needs on a small machine. The precise sleep cannot be interrupted; it is
// shorter than hrsleep.Coarse.
func waitUntil(ctx context.Context, timer *time.Timer, due time.Time) bool {
	for {
		wait := time.Until(due)
		if wait <= 0 {
			return ctx.Err() == nil
		}
		if wait < hrsleep.Coarse {
			hrsleep.Sleep(wait)
			continue
		}
		timer.Reset(wait - hrsleep.Coarse)
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
		}
	}
}

// do sends one request, reads the whole body and records the outcome in s,
// with latency measured from `from`.
func (r *runner) do(runCtx context.Context, s *shard, from time.Time) {
	ctx, cancel := context.WithTimeout(runCtx, r.cfg.Timeout)
	defer cancel()
	sent := time.Now()
	resp, err := r.client.Do(r.req.WithContext(ctx))
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
