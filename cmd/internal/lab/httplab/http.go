// Package httplab runs HTTP servers that answer every request with the same
// 1 MiB body, one at a time, each as its own process, and drives each with
// cpusched's load generator ("Benchmarking Go, Scala and Node.js", 2014).
//
// The Go servers are this binary re-executed as `cpusched lab-child http
// NAME -addr 127.0.0.1:0` (Serve); the Node.js and JVM servers are written to
// a temporary directory at run time and started with node and java. Every
// server prints the address it listens on as its first line of output.
package httplab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/childproc"
	"github.com/cpusched/cpusched/cmd/internal/load"
	"github.com/cpusched/cpusched/cmd/internal/sysstat"
)

// Servers are the valid server names, in the order tables list them:
//
//	go        Go net/http
//	martini   Go with github.com/go-martini/martini (router, no logger)
//	fasthttp  Go with github.com/valyala/fasthttp
//	gin       Go with github.com/gin-gonic/gin (release mode, no logger)
//	cpusched  Go net/http whose handler runs as a cpusched task
//	node      Node.js http (needs node)
//	jvm       the JDK's com.sun.net.httpserver, fixed thread pool (needs javac and java)
var Servers = []string{"go", "martini", "fasthttp", "gin", "cpusched", "node", "jvm"}

// GoServers are the servers Serve runs in a child of this binary.
var GoServers = []string{"go", "martini", "fasthttp", "gin", "cpusched"}

// Labels are the servers' names in tables.
var Labels = map[string]string{
	"go":       "Go net/http",
	"martini":  "Go + Martini",
	"fasthttp": "Go fasthttp",
	"gin":      "Go + gin",
	"cpusched": "Go net/http + cpusched",
	"node":     "Node.js http",
	"jvm":      "JVM com.sun.net.httpserver",
}

// Defaults of Config and of the CLI flags: ab's `-c 100 -n 10000`, as in the
// seed.
const (
	DefaultConcurrency = 100
	DefaultRequests    = 10000
	QuickRequests      = 2000
	// DefaultWarmup is the number of requests sent before each measured run.
	DefaultWarmup = 500
)

// Config is one run of the experiment.
type Config struct {
	Servers     []string // each one of Servers; not empty
	Concurrency int      // 1..load.MaxConcurrency
	Requests    int      // measured requests per server, >= 1
	Warmup      int      // requests before each measured run, >= 0

	// Command builds the child that runs a Go server, `cpusched lab-child
	// http NAME -addr ADDR`; only runs with a Go server need it.
	Command childproc.Command
	// LookPath finds node, javac and java; nil means exec.LookPath. A lookup
	// error makes the server's row "skipped: NAME not installed".
	LookPath func(file string) (string, error)
	// JVMThreads is the JVM server's thread pool size; 0 means 2 x NumCPU.
	JVMThreads int
	// Progress, if set, is called with a status line as the run goes.
	Progress func(status string)
}

// Validate reports the first problem with c as an error naming the flag and
// its valid values.
func (c Config) Validate() error {
	if len(c.Servers) == 0 {
		return fmt.Errorf("-servers must not be empty (valid: %s)", strings.Join(Servers, ", "))
	}
	for _, s := range c.Servers {
		if !slices.Contains(Servers, s) {
			return fmt.Errorf("-servers: unknown server %q (valid: %s)", s, strings.Join(Servers, ", "))
		}
	}
	if c.Concurrency < 1 || c.Concurrency > load.MaxConcurrency {
		return fmt.Errorf("-c must be in 1..%d, got %d", load.MaxConcurrency, c.Concurrency)
	}
	if c.Requests < 1 {
		return fmt.Errorf("-n must be >= 1, got %d", c.Requests)
	}
	if c.Warmup < 0 {
		return fmt.Errorf("-warmup must be >= 0, got %d", c.Warmup)
	}
	return nil
}

// Result is one server's row.
type Result struct {
	Server       string        `json:"server"`
	Label        string        `json:"label"`
	Skipped      string        `json:"skipped,omitempty"`
	Summary      *load.Summary `json:"summary,omitempty"`
	PeakRSSBytes uint64        `json:"peak_rss_bytes"`
	RSSBytes     uint64        `json:"rss_bytes"`
	StartS       float64       `json:"start_s"` // from exec to the address line (JVM: includes javac)
}

// Run measures every server of cfg in order, one at a time: start it, wait
// for its address, send cfg.Warmup requests, then cfg.Requests measured
// ones, read its peak RSS, stop it. A server that cannot run here (a missing
// program) gets a row with Skipped set. A server that fails to start or dies
// fails the run with an error naming it; the rows before it are returned with
// the error. Cancelling ctx stops the running server and returns ctx.Err().
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Command == nil && slices.ContainsFunc(cfg.Servers, func(s string) bool { return slices.Contains(GoServers, s) }) {
		return nil, errors.New("httplab.Run: Config.Command is nil")
	}
	if cfg.LookPath == nil {
		cfg.LookPath = exec.LookPath
	}
	if cfg.JVMThreads <= 0 {
		cfg.JVMThreads = 2 * runtime.NumCPU()
	}
	tmp, err := os.MkdirTemp("", "cpusched-lab-http-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	proc, err := sysstat.NewReader("")
	if err != nil {
		proc = nil // no /proc: RSS stays 0
	}
	var results []Result
	for _, name := range cfg.Servers {
		r, err := runOne(ctx, cfg, name, tmp, proc)
		if err != nil {
			if ctx.Err() != nil {
				return results, ctx.Err()
			}
			return results, fmt.Errorf("server %s: %w", name, err)
		}
		results = append(results, r)
	}
	return results, nil
}

func (c Config) progress(format string, args ...any) {
	if c.Progress != nil {
		c.Progress(fmt.Sprintf(format, args...))
	}
}

// command returns the command that starts server name, or a skip reason.
func command(ctx context.Context, cfg Config, name, tmp string) (*exec.Cmd, string, error) {
	switch name {
	case "node":
		node, err := cfg.LookPath("node")
		if err != nil {
			return nil, "skipped: node not installed", nil
		}
		js := filepath.Join(tmp, "server.js")
		if err := os.WriteFile(js, []byte(nodeSource), 0o644); err != nil {
			return nil, "", err
		}
		return exec.CommandContext(ctx, node, js), "", nil
	case "jvm":
		javac, err := cfg.LookPath("javac")
		if err != nil {
			return nil, "skipped: javac not installed (no JDK)", nil
		}
		java, err := cfg.LookPath("java")
		if err != nil {
			return nil, "skipped: java not installed", nil
		}
		dir := filepath.Join(tmp, "jvm")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, "", err
		}
		src := filepath.Join(dir, "Server.java")
		if err := os.WriteFile(src, []byte(javaSource), 0o644); err != nil {
			return nil, "", err
		}
		cfg.progress("%s: compiling Server.java", name)
		if out, err := exec.CommandContext(ctx, javac, "-d", dir, src).CombinedOutput(); err != nil {
			return nil, "", fmt.Errorf("javac: %w: %s", err, bytes.TrimSpace(out))
		}
		return exec.CommandContext(ctx, java, "-cp", dir, "Server", strconv.Itoa(cfg.JVMThreads)), "", nil
	}
	return cfg.Command(ctx, name, "-addr", "127.0.0.1:0"), "", nil
}

func runOne(ctx context.Context, cfg Config, name, tmp string, proc *sysstat.Reader) (Result, error) {
	res := Result{Server: name, Label: Labels[name]}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	t0 := time.Now()
	cmd, skip, err := command(sctx, cfg, name, tmp)
	if err != nil || skip != "" {
		res.Skipped = skip
		return res, err
	}
	lw := newLineWriter()
	var stderr limitedBuffer
	cmd.Stdout, cmd.Stderr = lw, &stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 3 * time.Second
	childproc.DieWithParent(cmd)
	cfg.progress("%s: starting", name)
	if err := cmd.Start(); err != nil {
		return res, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		stop()
		<-exited
	}()
	var addr string
	select {
	case addr = <-lw.first:
	case err := <-exited:
		exited <- err
		return res, fmt.Errorf("exited before printing its address (%v): %s", err, stderr.String())
	case <-time.After(30 * time.Second):
		return res, fmt.Errorf("no address line within 30s: %s", stderr.String())
	case <-ctx.Done():
		return res, ctx.Err()
	}
	res.StartS = time.Since(t0).Seconds()
	url := "http://" + strings.TrimSpace(addr) + "/"
	if cfg.Warmup > 0 {
		cfg.progress("%s: warm-up, %d requests", name, cfg.Warmup)
		if _, err := load.Run(ctx, load.Config{URL: url, Concurrency: min(cfg.Concurrency, cfg.Warmup), Requests: cfg.Warmup}); err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
	}
	cfg.progress("%s: %d requests at -c %d", name, cfg.Requests, cfg.Concurrency)
	lr, err := load.Run(ctx, load.Config{URL: url, Concurrency: cfg.Concurrency, Requests: cfg.Requests})
	if err != nil {
		return res, err
	}
	sum := lr.Summary()
	res.Summary = &sum
	if proc != nil {
		if p, err := proc.Process(cmd.Process.Pid); err == nil {
			res.PeakRSSBytes, res.RSSBytes = p.PeakRSSBytes, p.RSSBytes
		}
	}
	select {
	case err := <-exited:
		exited <- err
		return res, fmt.Errorf("server died during the run (%v): %s", err, stderr.String())
	default:
	}
	return res, nil
}

// lineWriter passes the first line written to it on first and discards the
// rest.
type lineWriter struct {
	mu    sync.Mutex
	buf   []byte
	sent  bool
	first chan string
}

func newLineWriter() *lineWriter { return &lineWriter{first: make(chan string, 1)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if i := bytes.IndexByte(w.buf, '\n'); i >= 0 {
		w.first <- string(w.buf[:i])
		w.sent, w.buf = true, nil
	} else if len(w.buf) > 4096 {
		w.first <- string(w.buf)
		w.sent, w.buf = true, nil
	}
	return len(p), nil
}

// limitedBuffer keeps the first 4 KiB written to it, for error messages.
type limitedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 4096 - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(string(b.buf))
}
