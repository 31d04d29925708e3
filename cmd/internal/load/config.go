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
	// MaxBody bounds Config.Body (-body), bytes: a request body to drive
	// a route with (a login form, a JSON document), not an upload test.
	MaxBody = 1 << 20
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

	// Header holds fields sent with every request (-H "Name: value"),
	// replacing any of the same name Run would set (User-Agent:
	// cpusched-load); a Host field sets the request's Host. Names must be
	// HTTP tokens, values free of control characters other than tab, and
	// Content-Length, Transfer-Encoding and Trailer are refused: the HTTP
	// client writes those itself.
	Header http.Header

	// Body, if not nil, is sent as every request's body, with its
	// Content-Length; at most MaxBody bytes. Set the Content-Type in
	// Header (the CLI's -body sets application/x-www-form-urlencoded
	// unless -H gives one, as curl -d does).
	Body []byte

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
	return c.validate(wording{})
}

// ValidateFlags is Validate for `cpusched load`, which sets c from its
// flags; given reports whether a flag (named without its dash) was on the
// command line. Its errors name a field by its flag alone ("-c must be in
// 1..10000, got 0"), and a flag given as 0 is an error where Validate
// reads a zero field as not set: -n 0 is no count, -rate 0 no rate,
// -timeout 0 no timeout.
func (c Config) ValidateFlags(given func(flag string) bool) error {
	return c.validate(wording{cli: true, given: given})
}

// validate checks c, its errors worded for w. The CLI has always reported
// its flags' problems before the URL's, the API the URL's first.
func (c Config) validate(w wording) error {
	checks := []func() error{c.checkTarget, func() error { return c.checkRun(w) }, func() error { return c.checkHeaders(w) }}
	if w.cli {
		checks[0], checks[1] = checks[1], checks[0]
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	if !c.AllowRemote {
		return checkLoopback(c.URL)
	}
	return nil
}

// checkTarget checks the URL's form and the method.
func (c Config) checkTarget() error {
	if _, err := c.parseURL(); err != nil {
		return err
	}
	if c.Method != "" && !isToken(c.Method) {
		return fmt.Errorf("load: Method (-m) %q is not a valid HTTP method token", c.Method)
	}
	if len(c.Body) > MaxBody {
		return fmt.Errorf("load: Body (-body) is %d bytes, want at most %d", len(c.Body), MaxBody)
	}
	return nil
}

// checkRun checks the numbers that shape the run: its concurrency, its
// length, its rate and the per-request timeout.
func (c Config) checkRun(w wording) error {
	switch {
	case c.Concurrency < 1 || c.Concurrency > MaxConcurrency:
		return errorf("%s must be in 1..%d, got %d", w.name("Concurrency", "c"), MaxConcurrency, c.Concurrency)
	case c.Requests < 0 || w.onCommandLine("n") && c.Requests == 0:
		return errorf("%s must be >= 1%s, got %d", w.name("Requests", "n"), w.orZero("to run for Duration"), c.Requests)
	case c.Duration < 0 || w.onCommandLine("d") && c.Duration == 0:
		return errorf("%s must be > 0, got %v", w.name("Duration", "d"), c.Duration)
	case c.Requests > 0 && c.Duration > 0:
		return errorf("give exactly one of %s or %s, not both", w.name("Requests", "n"), w.name("Duration", "d"))
	case c.Requests == 0 && c.Duration == 0:
		return errorf("give exactly one of %s or %s", w.pick("Requests (-n >= 1)", "-n COUNT"), w.pick("Duration (-d > 0)", "-d DURATION"))
	case math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) || c.Rate < 0 || c.Rate > MaxRate || w.onCommandLine("rate") && c.Rate == 0:
		return errorf("%s must be in (0, %g] requests/s%s, got %v", w.name("Rate", "rate"), float64(MaxRate), w.orZero("for closed loop"), c.Rate)
	case c.Rate > 0 && c.Duration == 0:
		return errorf("%s", w.pick("Rate (-rate) needs Duration (-d > 0); open loop runs for a time, not a count",
			"-rate needs -d DURATION (open loop runs for a time, not a count)"))
	case c.Drain && c.Rate == 0:
		return errors.New("load: Drain needs Rate (-rate > 0); it applies to open loop only")
	case c.Timeout < 0 || w.onCommandLine("timeout") && c.Timeout == 0:
		return errorf("%s must be > 0%s, got %v", w.name("Timeout", "timeout"), w.orZero("for "+DefaultTimeout.String()), c.Timeout)
	}
	return nil
}

// wording is how validate's errors name what is wrong: for the API by the
// field and its flag, for the CLI by the flag alone.
type wording struct {
	cli   bool
	given func(flag string) bool // the CLI's: was the flag on the command line
}

// name names a field: "Concurrency (-c)", or "-c" for the CLI.
func (w wording) name(field, flag string) string {
	if w.cli {
		return "-" + flag
	}
	return field + " (-" + flag + ")"
}

// onCommandLine reports whether flag was on the CLI's command line, where
// its value 0 is an error rather than the field not set.
func (w wording) onCommandLine(flag string) bool {
	return w.cli && w.given(flag)
}

// orZero returns the API's note on what a zero field means, " (or 0
// meaning)"; the CLI refuses a flag given as 0 and says nothing of it.
func (w wording) orZero(meaning string) string {
	if w.cli {
		return ""
	}
	return " (or 0 " + meaning + ")"
}

// pick returns the API's or the CLI's phrasing of the same thing.
func (w wording) pick(api, cli string) string {
	if w.cli {
		return cli
	}
	return api
}

// errorf returns an error of package load, as its other errors begin.
func errorf(format string, args ...any) error {
	return fmt.Errorf("load: "+format, args...)
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

// isToken reports whether m is an HTTP token (RFC 9110 section 5.6.2), as a
// method and a header name must be.
func isToken(m string) bool {
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
