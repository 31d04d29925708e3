package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/demo"
	"github.com/cpusched/cpusched/cmd/internal/load"
	"github.com/cpusched/cpusched/cmd/internal/tailtrace"
)

// tracing is one recording of a server's runtime/trace over a measured
// window, with the probe's latency of every request the server numbered
// (io-heavy's closed loop, in that step: its requests are numbered the
// same way, and its latencies count from each send).
type tracing struct {
	base       string // DIR/MODE-STEP
	sleep      time.Duration
	closedLoop bool
	mu         sync.Mutex
	client     map[uint64]tailtrace.Client
	done       chan struct{}
	fetchErr   error
}

// startTrace asks the server for a trace as long as the measured window
// of step (/debug/pprof/trace) and makes probe (the step's probe: /delay1ms,
// or io-heavy's /delay?d=500us) record its latencies by the server's
// sequence numbers.
func (m *meter) startTrace(ctx context.Context, step string, probe *load.Config) *tracing {
	name := strings.NewReplacer(":", "-w", "/", "_", "+", "-").Replace(m.spec + "-" + step)
	tr := &tracing{
		base:       filepath.Join(m.cfg.TraceDir, name),
		sleep:      probeSleep,
		closedLoop: probe.Rate == 0,
		client:     map[uint64]tailtrace.Client{},
		done:       make(chan struct{}),
	}
	if step == StepIOHeavy {
		tr.sleep = ioSleep
	}
	probe.OnResponse = tr.record
	url := m.base + "/debug/pprof/trace?seconds=" + strconv.FormatFloat(m.cfg.Step.Seconds(), 'f', -1, 64)
	go func() {
		defer close(tr.done)
		tr.fetchErr = fetchTo(ctx, url, tr.base+".trace")
	}()
	return tr
}

func (tr *tracing) record(r load.Response) {
	seq, err := strconv.ParseUint(r.Header.Get(demo.ProbeSeqHeader), 10, 64)
	if err != nil {
		return // answered outside the trace
	}
	tr.mu.Lock()
	tr.client[seq] = tailtrace.Client{Latency: r.Latency, Sent: r.Sent, Done: r.Done}
	tr.mu.Unlock()
}

// finish waits for the trace, analyzes it with requests above threshold
// (ms; why says where it comes from) as slow and writes the breakdown next
// to it; it returns that file.
func (tr *tracing) finish(threshold float64, why string) (string, error) {
	<-tr.done
	if tr.fetchErr != nil {
		return "", fmt.Errorf("recording a trace: %w", tr.fetchErr)
	}
	f, err := os.Open(tr.base + ".trace")
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	b, err := tailtrace.Analyze(f, tailtrace.Config{
		TaskType: demo.ProbeTaskType, SeqCategory: demo.ProbeSeqCategory, Sleep: tr.sleep, ClosedLoop: tr.closedLoop,
		Threshold: time.Duration(threshold * 1e6), Client: tr.client,
	})
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "slow: client latency above %.3f ms (%s)\n", threshold, why)
	if tr.closedLoop {
		fmt.Fprintf(&buf, "closed loop: each latency counts from the request's send\n")
	}
	if err := b.WriteText(&buf); err != nil {
		return "", err
	}
	out := tr.base + ".txt"
	return out, os.WriteFile(out, buf.Bytes(), 0o644)
}

// fetchTo GETs url into the file path.
func fetchTo(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return fmt.Errorf("%s: %s: %s", url, resp.Status, bytes.TrimSpace(msg))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
