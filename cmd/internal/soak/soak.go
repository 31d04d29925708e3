// Package soak runs the demo server under a long, hostile request mix and judges from its memory, goroutines and fds whether it leaks.
//
// Run starts `cpusched serve` as a child process on 127.0.0.1 (as package
// bench does) and, for Config.Duration, drives every endpoint with two
// open-loop streams of bounded concurrency:
//
//   - the mix, at Config.Rate: every endpoint with valid parameters (light
//     checksums, direct and scheduled, in every class, with nice values and
//     two fixed groups), bad parameters, unknown paths and wrong methods
//     (which must get 400, 404 and 405), and requests cancelled by the
//     client 5-10 ms in, while the server computes, sleeps or queues them;
//   - distinct groups, at Config.GroupRate: scheduled checksums each in a
//     group no other request names (the case that once leaked: the
//     scheduler kept every group's counters forever).
//
// Every response is counted per case and outcome; an outcome the case does
// not expect (a 500, a 200 for a bad parameter, a transport error) fails
// the run. Every Config.SampleInterval it samples the server's RSS,
// threads and open fds from /proc/PID and its goroutines (and the size and
// group count of /metrics) from GET /metrics. Rule decides from the
// samples whether the server leaks.
package soak

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/bench"
	"github.com/cpusched/cpusched/cmd/internal/report"
)

// Defaults and limits of Config.
const (
	DefaultDuration       = 10 * time.Minute
	DefaultRate           = 100
	DefaultGroupRate      = 20
	DefaultConcurrency    = 16
	DefaultSampleInterval = time.Second

	MinDuration    = 10 * time.Second
	MaxDuration    = 24 * time.Hour
	MaxRate        = 10000
	MaxConcurrency = 1000
)

// minDuration is the shortest Duration Validate accepts: MinDuration, which
// tests lower to run for a few seconds.
var minDuration = MinDuration

// groupConcurrency bounds the distinct-group stream's requests in flight.
const groupConcurrency = 4

// Config describes one soak run. Start from DefaultConfig; the zero value
// is not valid.
type Config struct {
	// ServerCmd runs the demo server, e.g. {"/path/to/cpusched", "serve"};
	// Run appends "-addr 127.0.0.1:0".
	ServerCmd []string
	// Duration is the length of the load (MinDuration..MaxDuration).
	Duration time.Duration
	// Rate is the mix's requests per second (1..MaxRate) and Concurrency
	// its most requests in flight (1..MaxConcurrency).
	Rate        float64
	Concurrency int
	// GroupRate is the distinct-group stream's requests per second
	// (1..MaxRate).
	GroupRate float64
	// SampleInterval is the time between samples (10ms..1m); Duration
	// must hold at least 10 of them.
	SampleInterval time.Duration
	// Progress shows the run's state; nil shows nothing.
	Progress *report.Progress
}

// DefaultConfig returns the default configuration for serverCmd.
func DefaultConfig(serverCmd ...string) Config {
	return Config{
		ServerCmd:      serverCmd,
		Duration:       DefaultDuration,
		Rate:           DefaultRate,
		Concurrency:    DefaultConcurrency,
		GroupRate:      DefaultGroupRate,
		SampleInterval: DefaultSampleInterval,
	}
}

// Validate reports the first problem with c as an error naming the field,
// its CLI flag if it has one, and the valid range.
func (c Config) Validate() error {
	switch {
	case len(c.ServerCmd) == 0 || c.ServerCmd[0] == "":
		return errors.New("soak: ServerCmd is required (the command that runs `cpusched serve`)")
	case c.Duration < minDuration || c.Duration > MaxDuration:
		return fmt.Errorf("soak: Duration (-d) must be in %s, got %v", DurationRange(), c.Duration)
	case math.IsNaN(c.Rate) || c.Rate < 1 || c.Rate > MaxRate:
		return fmt.Errorf("soak: Rate must be in 1..%d requests/s, got %v", MaxRate, c.Rate)
	case c.Concurrency < 1 || c.Concurrency > MaxConcurrency:
		return fmt.Errorf("soak: Concurrency must be in 1..%d, got %d", MaxConcurrency, c.Concurrency)
	case math.IsNaN(c.GroupRate) || c.GroupRate < 1 || c.GroupRate > MaxRate:
		return fmt.Errorf("soak: GroupRate must be in 1..%d requests/s, got %v", MaxRate, c.GroupRate)
	case c.SampleInterval < 10*time.Millisecond || c.SampleInterval > time.Minute:
		return fmt.Errorf("soak: SampleInterval must be in 10ms..1m, got %v", c.SampleInterval)
	case c.Duration < 10*c.SampleInterval:
		return fmt.Errorf("soak: Duration (%v) must hold at least 10 samples of SampleInterval (%v)", c.Duration, c.SampleInterval)
	}
	return nil
}

// DurationRange returns Duration's valid range as text: "10s..24h".
func DurationRange() string {
	return fmtDuration(minDuration) + ".." + fmtDuration(MaxDuration)
}

// fmtDuration writes whole hours, minutes and seconds briefly: 10s, 24h.
func fmtDuration(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// Report is the outcome of Run; the table, the summary and the JSON are
// written from it.
type Report struct {
	Config ReportConfig `json:"config"`
	Server string       `json:"server"` // the server's banner: "isolation=... workers=N gomaxprocs=M"
	// Samples are the server's state, one per SampleInterval.
	Samples []Sample `json:"samples"`
	// Requests counts the outcomes of every case of the mix.
	Requests []CaseCount `json:"requests"`
	// UnexpectedTotal counts the requests whose outcome their case did not
	// expect; Unexpected holds the first of them.
	UnexpectedTotal int64        `json:"unexpected_total"`
	Unexpected      []Unexpected `json:"unexpected"`
	// Checks are the verdicts (Rule's, then the requests' and the
	// server's); Pass is true if every one passed.
	Checks []Check `json:"checks"`
	Pass   bool    `json:"pass"`
	Rule   string  `json:"rule"`
}

// ReportConfig is the configuration a report was measured with.
type ReportConfig struct {
	DurationS        float64 `json:"duration_s"`
	Rate             float64 `json:"rate"`
	Concurrency      int     `json:"concurrency"`
	GroupRate        float64 `json:"group_rate"`
	SampleIntervalS  float64 `json:"sample_interval_s"`
	QueueBurst       int     `json:"queue_burst"` // cancelled scheduled checksums sent at once
	ElapsedS         float64 `json:"elapsed_s"`   // the load's actual length (shorter if interrupted)
	InterruptedEarly bool    `json:"interrupted,omitempty"`
}

// Run validates cfg, starts the server, soaks it for cfg.Duration and stops
// it. It returns the report and nil when the run went to its end, whether
// or not the server passed (see Report.Pass). An invalid cfg or a server
// that does not start returns (nil, error). If ctx ends first, or the
// server exits or its /proc entry cannot be read, it returns the report of
// the samples so far (Pass false) with the error. On every return the
// server process has exited.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	defer cfg.Progress.Done()
	cfg.Progress.Set("soak: starting the server")
	srv, err := bench.StartServer(ctx, cfg.ServerCmd[0], append(slices.Clone(cfg.ServerCmd[1:]), "-addr", "127.0.0.1:0")...)
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	defer srv.Stop()
	if err := checkLoopback(srv.URL()); err != nil {
		return nil, err
	}
	p, err := newProber(srv.PID(), srv.URL())
	if err != nil {
		return nil, err
	}
	defer p.close()

	burst := queueBurst(srv.Banner(), cfg.Concurrency)
	mix := mixCases(burst)
	cases := slices.Concat(mix, []requestCase{distinctGroupCase(strconv.FormatInt(time.Now().UnixNano()%1e6, 36))})
	d := newDriver(srv.URL(), cases, cfg.Concurrency+groupConcurrency)
	defer d.close()
	rep := &Report{
		Server: srv.Banner(),
		Rule:   RuleText,
		Config: ReportConfig{
			DurationS: cfg.Duration.Seconds(), Rate: cfg.Rate, Concurrency: cfg.Concurrency,
			GroupRate: cfg.GroupRate, SampleIntervalS: cfg.SampleInterval.Seconds(), QueueBurst: burst,
		},
	}

	start := time.Now()
	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	var streams sync.WaitGroup
	for _, s := range []stream{
		{order: cycle(mix), rate: cfg.Rate, conc: cfg.Concurrency, seed: 1},
		{order: []int{len(mix)}, rate: cfg.GroupRate, conc: groupConcurrency, seed: 2},
	} {
		streams.Go(func() { d.run(loadCtx, s, start) })
	}
	runErr := sampleUntilDone(loadCtx, cfg, srv, p, d, start, rep)
	stopLoad()
	streams.Wait()
	rep.Config.ElapsedS = time.Since(start).Seconds()
	if runErr == nil && ctx.Err() != nil {
		runErr = ctx.Err()
	}
	rep.Config.InterruptedEarly = runErr != nil

	rep.Requests, rep.UnexpectedTotal, rep.Unexpected = d.tally()
	d.close()
	p.close()
	rep.Checks = Rule(rep.Samples, cfg.Duration)
	rep.Checks = append(rep.Checks, requestsCheck(rep))
	if runErr == nil {
		cfg.Progress.Set("soak: stopping the server")
		stopErr := srv.Stop()
		c := Check{Name: "shutdown", Pass: stopErr == nil, Detail: "the server exited cleanly on SIGTERM"}
		if stopErr != nil {
			c.Detail = stopErr.Error()
		}
		rep.Checks = append(rep.Checks, c)
	}
	rep.Pass = runErr == nil
	for _, c := range rep.Checks {
		rep.Pass = rep.Pass && c.Pass
	}
	return rep, runErr
}

// sampleUntilDone samples the server every cfg.SampleInterval until ctx
// ends, appending to rep.Samples. It returns an error if the server exits
// or cannot be sampled.
func sampleUntilDone(ctx context.Context, cfg Config, srv *bench.ServerProcess, p *prober, d *driver, start time.Time, rep *Report) error {
	tick := time.NewTicker(cfg.SampleInterval)
	defer tick.Stop()
	lastDone, lastAt := int64(0), start
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-srv.Exited():
			return fmt.Errorf("soak: the server exited during the run: %s", srv.ExitError())
		case <-tick.C:
		}
		s, err := p.sample(ctx)
		if ctx.Err() != nil {
			return nil // the run ended during the sample: it may be cut short
		}
		if err != nil {
			select {
			case <-srv.Exited():
				return fmt.Errorf("soak: the server exited during the run: %s", srv.ExitError())
			default:
			}
			return err
		}
		now, done := time.Now(), d.done.Load()
		s.T = now.Sub(start).Seconds()
		s.RequestsPerS = float64(done-lastDone) / now.Sub(lastAt).Seconds()
		lastDone, lastAt = done, now
		rep.Samples = append(rep.Samples, s)
		cfg.Progress.Set("soak: %.0f/%.0f s  rss %.1f MB  goroutines %d  fds %d  groups %d  %.0f req/s  %d unexpected",
			s.T, cfg.Duration.Seconds(), float64(s.RSSBytes)/(1<<20), s.Goroutines, s.FDs, s.Groups, s.RequestsPerS, d.unexpectedSoFar())
	}
}

// requestsCheck fails on any unexpected outcome.
func requestsCheck(rep *Report) Check {
	var total, cancelled int64
	for _, c := range rep.Requests {
		for outcome, n := range c.Counts {
			total += n
			if outcome == OutcomeCancelled {
				cancelled += n
			}
		}
	}
	c := Check{Name: "requests", Pass: rep.UnexpectedTotal == 0 && total > 0}
	c.Detail = fmt.Sprintf("%d requests answered as expected or cancelled on purpose (%d cancelled), %d unexpected", total-rep.UnexpectedTotal, cancelled, rep.UnexpectedTotal)
	if total == 0 {
		c.Detail = "no request finished"
	}
	return c
}

// bannerWorkers finds "workers=N" in the server's banner.
var bannerWorkers = regexp.MustCompile(`\bworkers=(\d+)`)

// queueBurst is how many cancelled scheduled checksums go out at once: two
// more than the server's workers (from its banner; 2 if it does not say),
// so that some wait in the queue, but at most half the concurrency.
func queueBurst(banner string, concurrency int) int {
	workers := 2
	if m := bannerWorkers.FindStringSubmatch(banner); m != nil {
		workers, _ = strconv.Atoi(m[1])
	}
	return max(1, min(workers+2, concurrency/2))
}

// checkLoopback refuses a server URL whose host is not a loopback address:
// the soak sends hostile requests only to a server it started itself.
func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("soak: the server's URL %q: %w", raw, err)
	}
	if h := u.Hostname(); h != "127.0.0.1" && h != "::1" && h != "localhost" {
		return fmt.Errorf("soak: the server listens on %s, not on loopback; refusing to send it load", u.Host)
	}
	return nil
}
