// Tenants is a batch job that splits the CPU between two tenants by group
// weight: tenant gold (weight 300) and tenant free (weight 100) each queue
// the same CPU-heavy tasks at once, far more than there are worker slots, so
// the scheduler decides whose task runs next. While both have work, gold
// gets about 75% of the slot time and free 25%, whatever their task counts.
//
// The job stops when the first tenant has finished its tasks (after that the
// other would have the CPU to itself) or after -d, then prints each tenant's
// share of the run time and its tasks' waits for their first slot:
//
//	go run ./examples/tenants [-d 3s] [-tasks 2000]
package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/cpusched/cpusched"
)

// tenants are the job's tenants, each a cpusched group of that name.
var tenants = []struct {
	name   string
	weight int
}{
	{"gold", 300},
	{"free", 100},
}

// Limits of the flags, as their errors quote them.
const (
	minDuration, maxDuration = 10 * time.Millisecond, time.Hour
	minTasks, maxTasks       = 1, 100_000
)

// Each task hashes a block blocksPerTask times, about 1 ms of CPU.
const (
	blockSize     = 16 << 10
	blocksPerTask = 64
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "tenants:", err)
		}
		os.Exit(2)
	}
}

// run is the whole job: it parses args, runs the tenants' tasks and writes
// the table to stdout. It returns an error naming the flag for a bad flag,
// and stops early, still printing the table, when ctx ends.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tenants", flag.ContinueOnError)
	duration := fs.Duration("d", 3*time.Second, fmt.Sprintf("the longest the job runs, %v..%v", minDuration, maxDuration))
	tasks := fs.Int("tasks", 2000, fmt.Sprintf("tasks per tenant, %d..%d", minTasks, maxTasks))
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("takes no arguments, got %q", fs.Args())
	case *duration < minDuration || *duration > maxDuration:
		return fmt.Errorf("-d must be in %v..%v, got %v", minDuration, maxDuration, *duration)
	case *tasks < minTasks || *tasks > maxTasks:
		return fmt.Errorf("-tasks must be in %d..%d, got %d", minTasks, maxTasks, *tasks)
	}

	s, err := cpusched.New() // the default isolation: every CPU, tasks below the rest of the program
	if err != nil {
		return err
	}
	for _, tn := range tenants {
		if err := s.SetGroupWeight(tn.name, tn.weight); err != nil {
			s.Close(context.Background())
			return err
		}
	}

	ctx, stop := context.WithTimeout(ctx, *duration)
	defer stop()
	start := time.Now()
	done := make([]atomic.Int64, len(tenants))
	// Queue every task at once, the tenants' interleaved: a queued task costs
	// no goroutine, and the scheduler picks which runs next.
	for range *tasks {
		for i, tn := range tenants {
			_, err := s.Go(ctx, func(t *cpusched.Task) error {
				if err := hash(t); err != nil {
					return err
				}
				if done[i].Add(1) == int64(*tasks) {
					stop() // the first tenant to finish ends the contest
				}
				return nil
			}, cpusched.WithGroup(tn.name))
			if err != nil {
				s.Close(context.Background())
				return err
			}
		}
	}
	<-ctx.Done()
	elapsed := time.Since(start)
	// The tasks see ctx end at their next Checkpoint, the queued ones are
	// removed, and Close returns once all have ended.
	if err := s.Close(context.Background()); err != nil {
		return err
	}

	st := s.Stats()
	var total time.Duration
	for _, tn := range tenants {
		total += st.Groups[tn.name].RunTime
	}
	why := "-d is over"
	if errors.Is(ctx.Err(), context.Canceled) {
		why = "interrupted"
	}
	for i, tn := range tenants {
		if done[i].Load() == int64(*tasks) {
			why = tn.name + " finished first"
		}
	}
	fmt.Fprintf(stdout, "%d worker slots (%v); stopped after %v: %s\n\n", st.Workers, st.Isolation, elapsed.Round(time.Millisecond), why)
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "tenant\tweight\tdone\trun time\tshare\tqueue wait p50\tp99")
	for i, tn := range tenants {
		g := st.Groups[tn.name]
		share := 100 * g.RunTime.Seconds() / max(total.Seconds(), 1e-9)
		fmt.Fprintf(w, "%s\t%d\t%d/%d\t%v\t%.1f%%\t%s\t%s\n", tn.name, g.Weight, done[i].Load(), *tasks,
			g.RunTime.Round(time.Millisecond), share, quantile(&g.QueueWaits, 0.50), quantile(&g.QueueWaits, 0.99))
	}
	return w.Flush()
}

// hash is one task's CPU-heavy work, with a Checkpoint after each block so
// that the scheduler can give the slot to another task when the slice ends.
func hash(t *cpusched.Task) error {
	var block [blockSize]byte
	for range blocksPerTask {
		sum := sha256.Sum256(block[:])
		copy(block[:], sum[:])
		if err := t.Checkpoint(); err != nil {
			return err
		}
	}
	return nil
}

// quantile returns the upper bound of the bucket of h that holds the
// q-quantile, as "<=bound" (">bound" for the last, unbounded, bucket), or
// "-" for an empty h.
func quantile(h *cpusched.Histogram, q float64) string {
	n := h.Count()
	if n == 0 {
		return "-"
	}
	rank := max(uint64(math.Ceil(q*float64(n))), 1)
	var below uint64
	for i, c := range h.Counts {
		below += c
		if below < rank {
			continue
		}
		if i == len(h.Counts)-1 {
			return ">" + roundBound(cpusched.BucketBound(i-1))
		}
		return "<=" + roundBound(cpusched.BucketBound(i))
	}
	return "-" // not reached: the counts sum to n
}

// roundBound prints a bucket bound (1us<<i) to three significant digits:
// 524.288ms as 524ms.
func roundBound(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond).String()
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.String()
}
