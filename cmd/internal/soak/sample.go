package soak

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"

	"github.com/cpusched/cpusched/cmd/internal/sysstat"
)

// Sample is the server's state at one moment of the run.
type Sample struct {
	T          float64 `json:"t_s"`        // seconds since the load started
	RSSBytes   uint64  `json:"rss_bytes"`  // VmRSS
	Goroutines int     `json:"goroutines"` // go_goroutines from /metrics; -1 if the scrape failed
	Threads    int     `json:"threads"`    // num_threads
	FDs        int     `json:"fds"`        // entries of /proc/PID/fd
	// MetricsBytes is the size of the /metrics answer, and Groups the
	// number of groups it has series for (cpusched_group_weight lines);
	// both -1 if the scrape failed.
	MetricsBytes int `json:"metrics_bytes"`
	Groups       int `json:"groups"`
	// RequestsPerS is the mix's finished requests per second since the
	// previous sample.
	RequestsPerS float64 `json:"requests_per_s"`
	// ScrapeError says why /metrics could not be read, if it could not.
	ScrapeError string `json:"scrape_error,omitempty"`
}

// scrapeTimeout bounds one /metrics read: a healthy server answers in
// milliseconds.
const scrapeTimeout = 10 * time.Second

// prober samples one server process: /proc/PID and GET /metrics.
type prober struct {
	pid    int
	sys    *sysstat.Reader
	proc   procfs.Proc
	base   string
	client *http.Client
}

func newProber(pid int, base string) (*prober, error) {
	sys, err := sysstat.NewReader("")
	if err != nil {
		return nil, err
	}
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	proc, err := fs.Proc(pid)
	if err != nil {
		return nil, fmt.Errorf("soak: the server process: %w", err)
	}
	return &prober{pid: pid, sys: sys, proc: proc, base: base, client: &http.Client{Timeout: scrapeTimeout}}, nil
}

func (p *prober) close() { p.client.CloseIdleConnections() }

// sample reads the server's /proc entries and its /metrics. An error from
// /proc (the process is gone) is returned; a failed scrape is recorded in
// the sample.
func (p *prober) sample(ctx context.Context) (Sample, error) {
	var s Sample
	ps, err := p.sys.Process(p.pid)
	if err != nil {
		return s, err
	}
	s.RSSBytes, s.Threads = ps.RSSBytes, ps.Threads
	if s.FDs, err = p.proc.FileDescriptorsLen(); err != nil {
		return s, fmt.Errorf("soak: counting the server's fds: %w", err)
	}
	m, err := p.scrape(ctx)
	if err != nil {
		s.Goroutines, s.MetricsBytes, s.Groups = -1, -1, -1
		s.ScrapeError = err.Error()
		return s, nil
	}
	s.Goroutines, s.MetricsBytes, s.Groups = m.goroutines, m.bytes, m.groups
	return s, nil
}

// metricsFacts is what the soak reads from /metrics.
type metricsFacts struct {
	goroutines, bytes, groups int
}

func (p *prober) scrape(ctx context.Context) (metricsFacts, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/metrics", nil)
	if err != nil {
		return metricsFacts{}, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return metricsFacts{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return metricsFacts{}, fmt.Errorf("/metrics: %s", resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads a Prometheus text exposition for go_goroutines, its
// size and its number of cpusched_group_weight series.
func parseMetrics(r io.Reader) (metricsFacts, error) {
	m := metricsFacts{goroutines: -1}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		m.bytes += len(line) + 1
		switch {
		case bytes.HasPrefix(line, []byte("cpusched_group_weight")) && !bytes.HasPrefix(line, []byte("#")):
			m.groups++
		case bytes.HasPrefix(line, []byte("go_goroutines ")):
			v, err := strconv.ParseFloat(strings.TrimSpace(string(line[len("go_goroutines "):])), 64)
			if err != nil {
				return m, fmt.Errorf("/metrics: go_goroutines: %w", err)
			}
			m.goroutines = int(v)
		}
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("/metrics: %w", err)
	}
	if m.goroutines < 0 {
		return m, fmt.Errorf("/metrics has no go_goroutines")
	}
	return m, nil
}
