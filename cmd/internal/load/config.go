// Config, what a run is given, and its checks: the ranges, and that the
// target is loopback.

package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
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

// ErrNotLoopback is returned (wrapped) by Validate, and by the dialer of the
// client Run builds, when the target is not a loopback address and
// Config.AllowRemote is false.
var ErrNotLoopback = errors.New("not a loopback address (127.0.0.0/8, ::1, localhost); load tests target loopback only unless AllowRemote (-allow-remote) is set")

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
