package tailtrace

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/report"
)

// Totals sums the slow requests' parts per cause and counts the requests
// whose largest part (the sleep aside) is each cause.
func (b *Breakdown) Totals() (sum [numCauses]time.Duration, main [numCauses]int) {
	for _, r := range b.Requests {
		for c, d := range r.Parts {
			sum[c] += d
		}
		main[r.Main]++
	}
	return sum, main
}

// SubTotals sums the slow requests' subs.
func (b *Breakdown) SubTotals() (sum [numSubs]time.Duration) {
	for _, r := range b.Requests {
		for s, d := range r.Subs {
			sum[s] += d
		}
	}
	return sum
}

// WriteText writes the breakdown for people: the counts, a table of causes
// (each followed by its subs) with their share of the slow requests' delay
// (the sleep excluded), the runnable waits by what held the Ps, and the
// slowest requests.
func (b *Breakdown) WriteText(w io.Writer) error {
	ew := report.NewErrWriter(w)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	ew.Printf("trace: %.1f s, %d probe requests traced, %d matched to a client latency (%d followed), %d slower than %.2f ms (%d of them could not be followed)\n",
		b.TraceSpan.Seconds(), b.Traced, b.Matched, b.Followed, b.Slow, ms(b.Config.Threshold), b.Incomplete)
	ew.Printf("cpusched worker goroutines seen: %d; GC cycles begun: %d; stop-the-world pauses: %d (longest %.3f ms; the longest wait for a P to stop %.3f ms, for a P a worker held %.3f ms)\n",
		b.Workers, b.GCs, b.STWs, ms(b.STWMax), ms(b.STWWaitMax), ms(b.STWWaitWorkerMax))
	if b.ReadyBeforeSend > 0 {
		ew.Printf("%d followed requests found their handler ready before they were sent: their span starts at the send\n", b.ReadyBeforeSend)
	}
	if len(b.Requests) == 0 {
		return ew.Err()
	}
	sum, main := b.Totals()
	var delay time.Duration
	for c, d := range sum {
		if Cause(c) != CauseSleep {
			delay += d
		}
	}
	subs := b.SubTotals()
	n, all := float64(len(b.Requests)), float64(max(1, b.Followed))
	share := func(d time.Duration) string {
		if delay <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(d)/float64(delay))
	}
	ew.Printf("\n%-62s %9s %7s %8s %9s %9s\n", "cause", "slow: ms", "share", "main in", "mean slow", "mean all")
	for _, c := range Causes() {
		sh := share(sum[c])
		if c == CauseSleep {
			sh = "-"
		}
		ew.Printf("%-62s %9.1f %7s %8d %9.3f %9.3f\n", b.name(c), ms(sum[c]), sh, main[c], ms(sum[c])/n, ms(b.AllParts[c])/all)
		for s := range numSubs {
			if s.Parent() == c {
				ew.Printf("  %-60s %9.1f %7s %8s %9.3f %9.3f\n", s, ms(subs[s]), share(subs[s]), "-", ms(subs[s])/n, ms(b.AllSubs[s])/all)
			}
		}
	}

	// Runnable waits, grouped by who waited and what held the Ps.
	type key struct {
		who, holder string
		cause       Cause
		stolen      bool
	}
	type agg struct {
		n       int
		total   time.Duration
		workers int
		others  int
		idle    int
		handoff int
		maxWait time.Duration
	}
	groups := map[key]*agg{}
	for _, r := range b.Requests {
		for _, wt := range r.Waits {
			k := key{wt.Who, wt.Holder, wt.Cause, wt.Stolen}
			g := groups[k]
			if g == nil {
				g = &agg{}
				groups[k] = g
			}
			g.n++
			g.total += wt.Dur
			g.workers += wt.Workers
			g.others += wt.Others
			g.idle += wt.IdlePs
			g.handoff += wt.Handoffs
			g.maxWait = max(g.maxWait, wt.Dur)
		}
	}
	keys := make([]key, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return groups[keys[i]].total > groups[keys[j]].total })
	if len(keys) > 0 {
		ew.Printf("\nrunnable waits over 50 us in slow requests, by goroutine and what held the P it was queued on halfway through\n")
		ew.Printf("%-8s %-8s %-7s %6s %10s %8s   %s\n", "who", "queue P", "stolen", "n", "total ms", "max ms", "Ps halfway: workers/others/handoff/idle (mean)")
		for _, k := range keys {
			g := groups[k]
			n := float64(g.n)
			ew.Printf("%-8s %-8s %-7t %6d %10.1f %8.2f   %.1f/%.1f/%.1f/%.1f\n", k.who, k.holder, k.stolen, g.n, ms(g.total), ms(g.maxWait),
				float64(g.workers)/n, float64(g.others)/n, float64(g.handoff)/n, float64(g.idle)/n)
		}
	}

	ew.Printf("\nslowest requests (ms): seq latency span | main cause | parts\n")
	for i, r := range b.Requests {
		if i == 10 {
			break
		}
		ew.Printf("#%d %.2f %.2f | %s |", r.Seq, ms(r.Latency), ms(r.Span), r.Main)
		for c, d := range r.Parts {
			if d >= 10*time.Microsecond {
				ew.Printf(" %s=%.2f", shortNames[c], ms(d))
			}
		}
		ew.Printf("\n")
	}
	return ew.Err()
}

// name is c's name in this breakdown's report: the client's part and the
// sleep are named by what the Config says they are.
func (b *Breakdown) name(c Cause) string {
	switch {
	case c == CauseClientLate && b.Config.ClosedLoop:
		return "client: before the request was sent (closed loop)"
	case c == CauseSleep && b.Config.Sleep > 0:
		return "the " + durationWords(b.Config.Sleep) + " sleep itself"
	}
	return c.String()
}

// durationWords writes d as the reports do: "1 ms", "500 us".
func durationWords(d time.Duration) string {
	switch {
	case d%time.Millisecond == 0:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + " ms"
	case d%time.Microsecond == 0:
		return strconv.FormatInt(int64(d/time.Microsecond), 10) + " us"
	}
	return d.String()
}

// shortNames are the causes' names in the per-request lines.
var shortNames = [numCauses]string{
	CauseClientLate:      "client-late",
	CauseInbound:         "inbound",
	CauseOutbound:        "outbound",
	CauseOutside:         "outside",
	CauseRunnableOnWkr:   "runnable-on-worker-P",
	CauseRunnableHandoff: "runnable-P-in-handoff",
	CauseRunnableBusy:    "runnable-all-busy",
	CauseRunnableIdleP:   "runnable-idle-P",
	CauseGCStop:          "gc-stw",
	CauseGCAssist:        "gc-assist",
	CauseTimerOnWkr:      "timer-late-on-worker-P",
	CauseTimerLate:       "timer-late",
	CauseRunning:         "running",
	CauseSyscall:         "syscall",
	CauseBlocked:         "blocked",
	CauseSleep:           "sleep",
}
