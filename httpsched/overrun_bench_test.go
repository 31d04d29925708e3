package httpsched

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
)

// mixedLoad is a server whose scheduler runs a route that checkpoints
// (render) beside one that cannot (login: a library call with no
// Checkpoint, as bcrypt), with a plain handler (probe) outside the
// scheduler, under closed-loop clients.
type mixedLoad struct {
	isolation     cpusched.Isolation
	workers       int
	render, login func(*cpusched.Task) // the routes' work
	renderWait    time.Duration        // render's WithMaxQueueWait; 0: without
	renderClients int
	loginClients  int
	shedPause     time.Duration // a shed render client's pause before it sends again
	probe         func()        // the probe's work, on its client's goroutine; nil: none
	probePause    time.Duration // the probe client's pause between requests
	length        time.Duration
}

// mixedResult is what a run of a mixedLoad counts.
type mixedResult struct {
	rendered, render503   int
	byClient              []int           // render's requests served to each of its clients
	renderRun, renderWait time.Duration   // means over render's served requests: response time less Task.Waited, and Task.Waited
	probes                []time.Duration // each probe's response time
	render, login         RouteStats      // at the end
	meanLimit             float64         // render's limit (RouteStats.Limit) averaged over the runs, in samples every 5 ms
	runs                  int
}

// add adds o's counts to r's; the RouteStats become o's.
func (r *mixedResult) add(o mixedResult) {
	n := time.Duration(max(1, r.rendered+o.rendered))
	r.renderRun = (r.renderRun*time.Duration(r.rendered) + o.renderRun*time.Duration(o.rendered)) / n
	r.renderWait = (r.renderWait*time.Duration(r.rendered) + o.renderWait*time.Duration(o.rendered)) / n
	r.rendered += o.rendered
	r.render503 += o.render503
	r.probes = append(r.probes, o.probes...)
	r.byClient = append(r.byClient, o.byClient...)
	r.render, r.login = o.render, o.login
	r.meanLimit = (r.meanLimit*float64(r.runs) + o.meanLimit*float64(o.runs)) / float64(max(1, r.runs+o.runs))
	r.runs += o.runs
}

func (m mixedLoad) run(tb testing.TB) mixedResult {
	tb.Helper()
	s, err := cpusched.New(cpusched.WithIsolation(m.isolation), cpusched.WithWorkers(m.workers))
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close(context.Background())
	var opts []Option
	if m.renderWait > 0 {
		opts = append(opts, WithMaxQueueWait(m.renderWait))
	}
	var runSum, waitSum atomic.Int64
	render := Handler(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		t := TaskFrom(r.Context())
		before := t.Waited()
		m.render(t)
		waited := t.Waited()
		runSum.Add(int64(time.Since(start) - (waited - before)))
		waitSum.Add(int64(waited))
	}), opts...)
	login := Handler(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.login(TaskFrom(r.Context()))
	}))
	var rendered, render503 atomic.Int64
	var probes []time.Duration // the probe client's alone
	byClient := make([]int, m.renderClients)
	stop := time.Now().Add(m.length)
	var wg sync.WaitGroup
	clients := func(n int, send func(client int)) {
		for i := range n {
			wg.Go(func() {
				for time.Now().Before(stop) {
					send(i)
				}
			})
		}
	}
	clients(m.renderClients, func(i int) {
		if serve(render, httptest.NewRequest("GET", "/render", nil)).Code != http.StatusOK {
			render503.Add(1)
			time.Sleep(m.shedPause)
			return
		}
		rendered.Add(1)
		byClient[i]++
	})
	clients(m.loginClients, func(int) { serve(login, httptest.NewRequest("POST", "/login", nil)) })
	if m.probe != nil {
		clients(1, func(int) {
			sent := time.Now()
			m.probe()
			probes = append(probes, time.Since(sent))
			time.Sleep(m.probePause)
		})
	}
	var limits, samples int
	clients(1, func(int) {
		st, _ := RouteStatsOf(render)
		limits, samples = limits+st.Limit, samples+1
		time.Sleep(5 * time.Millisecond)
	})
	wg.Wait()
	n := max(1, rendered.Load())
	res := mixedResult{rendered: int(rendered.Load()), render503: int(render503.Load()),
		renderRun: time.Duration(runSum.Load() / n), renderWait: time.Duration(waitSum.Load() / n), probes: probes, byClient: byClient}
	res.meanLimit, res.runs = float64(limits)/float64(max(1, samples)), 1
	res.render, _ = RouteStatsOf(render)
	res.login, _ = RouteStatsOf(login)
	return res
}

// hashRoundsPerMs returns how many rounds of hashRounds take a
// millisecond of CPU: the most of ten 10 ms trials, so that other work on
// the machine during one does not shrink the work the benchmarks size
// with it.
func hashRoundsPerMs() int {
	best := 0
	for range 10 {
		n := 0
		for start := time.Now(); time.Since(start) < 10*time.Millisecond; n += 100 {
			hashRounds(100, nil)
		}
		best = max(best, n/10)
	}
	return best
}

// quantile returns the q quantile of ds, which it sorts.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

// mean returns the mean of ds.
func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(max(1, len(ds)))
}

// BenchmarkShedBesideNonYielding: render, a route that checkpoints,
// beside login, whose calls never come to a Checkpoint, on a two-slot
// scheduler, 4 closed-loop clients each (a shed render client pauses
// 1 ms), and a plain probe handler (0.1 ms of CPU, every 5 ms) outside
// the scheduler. Three times, a run without WithMaxQueueWait measures
// render's run time r on the machine as it is (its response time less
// Task.Waited), and one with WithMaxQueueWait(5r) follows. It reports
// render's requests served with the option over those without (want
// >= 0.8), the probe's mean and p99 response time with over without
// (want <= 1.5), the share of render's requests shed with the option,
// render's limit averaged over time, r, and the routes'
// RouteStats.Overrun. Run it with -benchtime 1x: one iteration is the
// whole run, about 10 s per case.
//
// work=cpu: render is 20 ms of CPU with a Checkpoint per SHA-256 round,
// login 40 ms of CPU (bcrypt's place), in IsolationOSPriority. work=sleep:
// both hold their slot sleeping instead (render 20 sleeps of 1 ms, login
// one of 40 ms), in IsolationNone: the same waits with the machine's load
// out of the way, only the probe computing.
func BenchmarkShedBesideNonYielding(b *testing.B) {
	perMs := hashRoundsPerMs()
	probe := func() { hashRounds(perMs/10, nil) }
	cases := []struct {
		name string
		load mixedLoad
	}{
		{"work=cpu", mixedLoad{
			isolation: cpusched.IsolationOSPriority,
			render:    func(t *cpusched.Task) { hashRounds(20*perMs, t) },
			login:     func(*cpusched.Task) { hashRounds(40*perMs, nil) },
		}},
		{"work=sleep", mixedLoad{
			isolation: cpusched.IsolationNone,
			render:    func(t *cpusched.Task) { sleepWork(20, time.Millisecond, t) },
			login:     func(*cpusched.Task) { time.Sleep(40 * time.Millisecond) },
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			m := c.load
			m.workers, m.renderClients, m.loginClients = 2, 4, 4
			m.shedPause, m.probe, m.probePause = time.Millisecond, probe, 5*time.Millisecond
			m.length = 1500 * time.Millisecond
			for b.Loop() {
				var without, with mixedResult
				for range 3 {
					m.renderWait = 0
					o := m.run(b)
					without.add(o)
					m.renderWait = 5 * o.renderRun
					with.add(m.run(b))
				}
				b.Logf("without: %d served, mean wait %v; with 5r: %d served, %d shed, mean wait %v; render %+v; login %+v",
					without.rendered, without.renderWait, with.rendered, with.render503, with.renderWait, with.render, with.login)
				b.ReportMetric(float64(with.rendered)/float64(max(1, without.rendered)), "served-ratio")
				b.ReportMetric(float64(mean(with.probes))/float64(max(1, mean(without.probes))), "probe-mean-ratio")
				b.ReportMetric(float64(quantile(with.probes, 0.99))/float64(max(1, quantile(without.probes, 0.99))), "probe-p99-ratio")
				b.ReportMetric(100*float64(with.render503)/float64(max(1, with.rendered+with.render503)), "shed-%")
				b.ReportMetric(with.meanLimit, "mean-limit")
				b.ReportMetric(float64(without.renderRun)/1e6, "r-ms")
				b.ReportMetric(float64(with.render.Overrun)/1e6, "render-overrun-ms")
				b.ReportMetric(float64(with.login.Overrun)/1e6, "login-overrun-ms")
			}
		})
	}
}

// BenchmarkOverrunSample is the sample that WithMaxQueueWait adds twice
// to each request it admits (overrun.go): Scheduler.Overruns under the
// scheduler's lock and the clock's count, on an idle two-slot scheduler,
// against BenchmarkOverrunSampleBaseline, the lock and clock read alone.
func BenchmarkOverrunSample(b *testing.B) {
	s := benchScheduler(b)
	c := overrunClockFor(s)
	for b.Loop() {
		c.sample(s)
	}
}

// BenchmarkOverrunSampleBaseline is a lock and a clock read, the floor of
// BenchmarkOverrunSample.
func BenchmarkOverrunSampleBaseline(b *testing.B) {
	var mu sync.Mutex
	start := time.Now()
	var sink time.Duration
	for b.Loop() {
		mu.Lock()
		sink += time.Since(start)
		mu.Unlock()
	}
	_ = sink
}
