// The shape of the hog's work (Jobs): how many passes a job has, how
// many of the jobs are long calls, and how long a goroutine rests between
// jobs, as `cpusched bench`'s tenants step shapes a tenant's work.

package hogproc

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/demo"
)

// MaxPause bounds Jobs.Pause.
const MaxPause = 10 * time.Second

// Jobs is the shape of the work of each of the hog's goroutines: jobs one
// after the other, each a random count of passes. The zero value is not
// valid; start from DefaultJobs.
type Jobs struct {
	// MinPasses..MaxPasses is a job's passes (demo.MinPasses..
	// demo.MaxPasses): by default the demo's /checksum without n,
	// demo.DefaultMinPasses..DefaultMaxPasses.
	MinPasses, MaxPasses int
	// CallPct per cent of the jobs (0..100) are calls of
	// MinCallPasses..MaxCallPasses passes instead: the work a server runs
	// without a Checkpoint (a bcrypt). Here nothing checkpoints, so only
	// their length differs.
	CallPct                      int
	MinCallPasses, MaxCallPasses int
	// Pause, when not 0, makes a goroutine rest a random 0..Pause
	// (0..MaxPause) after each job, as a bursty client between requests.
	Pause time.Duration
}

// DefaultJobs returns the floor's hog's jobs: the demo's default
// /checksum, one after the other.
func DefaultJobs() Jobs {
	return Jobs{MinPasses: demo.DefaultMinPasses, MaxPasses: demo.DefaultMaxPasses}
}

// Validate returns an error naming the first field, with its flag, that
// is out of range.
func (j Jobs) Validate() error {
	passes := func(what string, lo, hi int) error {
		if lo < demo.MinPasses || hi > demo.MaxPasses || lo > hi {
			return fmt.Errorf("%s must be MIN-MAX with %d <= MIN <= MAX <= %d, got %d-%d", what, demo.MinPasses, demo.MaxPasses, lo, hi)
		}
		return nil
	}
	if err := passes("-passes", j.MinPasses, j.MaxPasses); err != nil {
		return err
	}
	if j.CallPct < 0 || j.CallPct > 100 {
		return fmt.Errorf("-call-pct must be in 0..100, got %d", j.CallPct)
	}
	if j.CallPct > 0 {
		if err := passes("-call-passes", j.MinCallPasses, j.MaxCallPasses); err != nil {
			return err
		}
	}
	if j.Pause < 0 || j.Pause > MaxPause {
		return fmt.Errorf("-pause must be in 0..%v, got %v", MaxPause, j.Pause)
	}
	return nil
}

// Args returns the flags that give Command or NeighborCommand these jobs.
func (j Jobs) Args() []string {
	args := []string{"-passes", passRange(j.MinPasses, j.MaxPasses)}
	if j.CallPct > 0 {
		args = append(args, "-call-pct", strconv.Itoa(j.CallPct), "-call-passes", passRange(j.MinCallPasses, j.MaxCallPasses))
	}
	if j.Pause > 0 {
		args = append(args, "-pause", j.Pause.String())
	}
	return args
}

func passRange(lo, hi int) string { return strconv.Itoa(lo) + "-" + strconv.Itoa(hi) }

// rangeFlag is a MIN-MAX flag of passes.
type rangeFlag struct{ lo, hi *int }

func (f rangeFlag) String() string {
	if f.lo == nil {
		return ""
	}
	return passRange(*f.lo, *f.hi)
}

func (f rangeFlag) Set(s string) error {
	lo, hi, ok := strings.Cut(s, "-")
	a, errA := strconv.Atoi(lo)
	b, errB := strconv.Atoi(hi)
	if !ok || errA != nil || errB != nil {
		return fmt.Errorf("want MIN-MAX, two integers, got %q", s)
	}
	*f.lo, *f.hi = a, b
	return nil
}

// addFlags defines the flags of j on fs, j's values their defaults.
func (j *Jobs) addFlags(fs *flag.FlagSet) {
	fs.Var(rangeFlag{&j.MinPasses, &j.MaxPasses}, "passes", fmt.Sprintf("a job's passes, MIN-MAX (%d..%d)", demo.MinPasses, demo.MaxPasses))
	fs.IntVar(&j.CallPct, "call-pct", j.CallPct, "per cent of the jobs that are calls of -call-passes instead (0..100)")
	fs.Var(rangeFlag{&j.MinCallPasses, &j.MaxCallPasses}, "call-passes", "a call's passes, MIN-MAX")
	fs.DurationVar(&j.Pause, "pause", j.Pause, fmt.Sprintf("rest a random 0..D after each job (0..%v; 0: never)", MaxPause))
}

// next draws the passes of the next job.
func (j Jobs) next() int {
	if j.CallPct > 0 && rand.IntN(100) < j.CallPct {
		return j.MinCallPasses + rand.IntN(j.MaxCallPasses-j.MinCallPasses+1)
	}
	return j.MinPasses + rand.IntN(j.MaxPasses-j.MinPasses+1)
}

// rest sleeps a random 0..Pause after a job, or until ctx ends.
func (j Jobs) rest(ctx context.Context) {
	if j.Pause <= 0 {
		return
	}
	t := time.NewTimer(rand.N(j.Pause + 1))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
