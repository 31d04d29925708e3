// TestStress: the submitters and the random calls they make, with their contexts and task bodies.

package cpusched

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// stressGroups are the groups tasks and weights are drawn from.
var stressGroups = []string{"", "a", "b", "c", "a-tenant-with-a-longer-name"}

// stressKinds are the kinds (WithKind) stress calls take: more than a
// group keeps estimates for (groupKinds), so that kinds are replaced.
var stressKinds = []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11"}

// stressSubmitter makes calls in a loop, keeping up to maxPending Go
// handles and four Run goroutines in flight.
type stressSubmitter struct {
	r          *stressRound
	rng        *rand.Rand
	calls      []*stressCall
	pending    []stressPending
	maxPending int
	async      sync.WaitGroup
	asyncSlots chan struct{}
}

type stressPending struct {
	c *stressCall
	h *Handle
}

func (sub *stressSubmitter) run() {
	r := sub.r
	for {
		select {
		case <-r.closeStarted:
		default:
			if r.tickets.Add(1) <= int64(r.size) {
				sub.call(false, sub.rng.IntN(2) == 0)
				continue
			}
		}
		break
	}
	sub.drain()
	if r.closeKind != closeNone {
		<-r.closeReturned
		for range 1 + sub.rng.IntN(2) {
			sub.call(true, sub.rng.IntN(2) == 0)
		}
		sub.drain()
	}
}

// call makes one call: Go, or Run inline or on its own goroutine.
func (sub *stressSubmitter) call(late, isGo bool) {
	c := sub.newCall(late, isGo)
	sub.calls = append(sub.calls, c)
	if c.idle {
		sub.r.idleStarted.Add(1)
	}
	s := sub.r.s
	if isGo {
		h, err := s.Go(c.ctx, c.fn, c.opts...)
		if err != nil || h == nil {
			if err == nil {
				sub.r.errorf("%s: Go returned neither a Handle nor an error", c)
			}
			c.rejectedByGo = true
			c.end(err)
			sub.backOff(err)
			return
		}
		sub.pending = append(sub.pending, stressPending{c, h})
		if len(sub.pending) > sub.maxPending {
			sub.waitOldest()
		}
		return
	}
	if c.body == bodyGoexit || sub.rng.IntN(4) == 0 {
		// runtime.Goexit in fn ends Run's goroutine when fn runs on it.
		sub.asyncSlots <- struct{}{}
		sub.async.Go(func() {
			defer func() { <-sub.asyncSlots }()
			c.runRun()
		})
		return
	}
	c.runRun()
	sub.backOff(c.result)
}

// backOff waits a little after ErrQueueFull, so that rounds with short
// queues run tasks rather than mostly refusals.
func (sub *stressSubmitter) backOff(err error) {
	if err == ErrQueueFull {
		time.Sleep(time.Duration(sub.rng.Int64N(int64(500 * time.Microsecond))))
	}
}

// waitOldest waits for the oldest pending Go task, through Done then Wait
// or through Wait then Done.
func (sub *stressSubmitter) waitOldest() {
	p := sub.pending[0]
	sub.pending = sub.pending[1:]
	var err error
	if sub.rng.IntN(2) == 0 {
		<-p.h.Done()
		err = p.h.Wait()
	} else {
		err = p.h.Wait()
		select {
		case <-p.h.Done():
		default:
			sub.r.errorf("%s: Wait returned before Done was closed", p.c)
		}
	}
	if again := p.h.Wait(); again != err {
		sub.r.errorf("%s: Wait returned %v, then %v", p.c, err, again)
	}
	p.c.end(err)
}

func (sub *stressSubmitter) drain() {
	for len(sub.pending) > 0 {
		sub.waitOldest()
	}
	sub.async.Wait()
}

// Task bodies.
type stressBody int

const (
	bodyNil stressBody = iota
	bodyError
	bodyPanic
	bodyGoexit
	bodySpin
	bodyBlocking
	bodyBlockingPanic
	bodyNestedBlocking
	bodyCheckpointInBlocking
	bodyCancelSelf // cancels its own context, then spins
	bodyMixed      // spin, Blocking, spin
	bodyContext    // spins, then returns the cause of Task.Context's end, if any
	bodyUntilClosed
	bodySleep // spin, sleep without Blocking (for WithIdleRelease), spin
	bodyCall  // spins past its slice without a Checkpoint: a call that cannot yield, of its own kind
	numStressBodies
)

var stressBodyNames = [numStressBodies]string{"nil", "error", "panic", "goexit", "spin", "blocking", "blocking-panic",
	"nested-blocking", "checkpoint-in-blocking", "cancel-self", "mixed", "context", "until-closed", "sleep", "call"}

// stressBodyWeights are how often submitters draw each body.
var stressBodyWeights = [numStressBodies]int{20, 8, 5, 3, 15, 8, 4, 4, 4, 5, 5, 4, 0, 6, 3}

// Contexts of calls.
const (
	ctxBackground   = iota
	ctxCancelAfter  // cancelled after the call returned
	ctxPreCancelled // cancelled before submission
	ctxCancelSoon   // cancelled 0..300us after it was made: before, while queued or during the run
	ctxTimeout      // a deadline 0..1ms away
	ctxShared       // one of the round's three (one is cancelled mid-round)
	numStressCtxs
)

var stressCtxNames = [numStressCtxs]string{"background", "cancel-after", "pre-cancelled", "cancel-soon", "timeout", "shared"}

var stressCtxWeights = [numStressCtxs]int{30, 15, 8, 12, 12, 18}

var errStressTask = errors.New("stress: task failed")

// stressPanicValue is what bodies panic with when not with an error.
type stressPanicValue struct{ id int }

// stressCall is one Run or Go call and what its fn did.
type stressCall struct {
	r         *stressRound
	body      stressBody
	ctxKind   int
	isGo      bool
	late      bool // made after Close returned
	badOption bool
	ctx       context.Context
	cancel    context.CancelFunc
	timer     *time.Timer
	opts      []TaskOption
	idle      bool // WithIdleRelease is among opts
	spinFor   time.Duration
	sleepFor  time.Duration
	panicWith any
	started   chan struct{} // bodyUntilClosed: closed as fn starts

	// Written by fn (plain fields: the race detector checks that the call
	// returns after fn has ended).
	ran      int
	returned error
	panicked any
	goexit   bool

	// Written by the caller as the call returns.
	ends         atomic.Int32
	result       error
	ctxErr       error // ctx.Err() as the call returned
	rejectedByGo bool
	goexited     bool // Run's goroutine ended in runtime.Goexit
}

func (c *stressCall) String() string {
	call := "Run"
	if c.isGo {
		call = "Go"
	}
	return fmt.Sprintf("%s(%s body, %s ctx)", call, stressBodyNames[c.body], stressCtxNames[c.ctxKind])
}

func (sub *stressSubmitter) newCall(late, isGo bool) *stressCall {
	rng := sub.rng
	c := &stressCall{
		r:        sub.r,
		body:     stressBody(stressPick(rng, stressBodyWeights[:])),
		ctxKind:  stressPick(rng, stressCtxWeights[:]),
		isGo:     isGo,
		late:     late,
		spinFor:  10*time.Microsecond + time.Duration(rng.Int64N(int64(290*time.Microsecond))),
		sleepFor: time.Duration(rng.Int64N(int64(200 * time.Microsecond))),
	}
	if rng.IntN(2) == 0 {
		c.panicWith = &stressPanicValue{id: rng.Int()}
	} else {
		c.panicWith = fmt.Errorf("stress: panic %d", rng.Int())
	}
	if c.body == bodyCancelSelf {
		c.ctxKind = ctxCancelAfter // its own context, to cancel
	}
	bg := context.Background()
	switch c.ctxKind {
	case ctxBackground:
		c.ctx = bg
	case ctxCancelAfter:
		c.ctx, c.cancel = context.WithCancel(bg)
	case ctxPreCancelled:
		c.ctx, c.cancel = context.WithCancel(bg)
		c.cancel()
	case ctxCancelSoon:
		c.ctx, c.cancel = context.WithCancel(bg)
		c.timer = time.AfterFunc(time.Duration(rng.Int64N(int64(300*time.Microsecond))), c.cancel)
	case ctxTimeout:
		c.ctx, c.cancel = context.WithTimeout(bg, time.Duration(rng.Int64N(int64(time.Millisecond))))
	case ctxShared:
		c.ctx = sub.r.shared[rng.IntN(len(sub.r.shared))]
	}
	c.opts = []TaskOption{WithClass(Class(rng.IntN(numClasses))), WithNice(MinNice + rng.IntN(MaxNice-MinNice+1))}
	if g := rng.IntN(len(stressGroups) + 1); g < len(stressGroups) {
		c.opts = append(c.opts, WithGroup(stressGroups[g]))
	}
	if rng.IntN(2) == 0 { // more kinds than a group keeps (groupKinds)
		c.opts = append(c.opts, WithKind(stressKinds[rng.IntN(len(stressKinds))]))
	}
	if c.body == bodyCall {
		// Its kind runs past the lane's slice, so that slots are kept at
		// the ends of the tasks that yield (keep.go), in every mode.
		c.opts = append(c.opts, WithKind("call"), WithClass(ClassNormal), WithTaskSlice(minSlice))
		c.spinFor = 1500*time.Microsecond + time.Duration(rng.Int64N(int64(time.Millisecond)))
	}
	if rng.IntN(3) == 0 {
		c.opts = append(c.opts, WithTaskSlice(minSlice+time.Duration(rng.Int64N(int64(2*time.Millisecond)))))
	}
	if rng.IntN(4) == 0 || c.body == bodySleep && rng.IntN(2) == 0 {
		c.opts = append(c.opts, WithIdleRelease(minIdleRelease+time.Duration(rng.Int64N(int64(2*time.Millisecond)))))
		c.idle = true
	}
	if c.body == bodySleep {
		c.sleepFor = time.Duration(rng.Int64N(int64(6 * time.Millisecond)))
	}
	if rng.IntN(20) == 0 {
		c.opts = append(c.opts, nil)
	}
	if !late && rng.IntN(200) == 0 {
		bad := []TaskOption{WithNice(MaxNice + 1), WithClass(Class(numClasses)), WithTaskSlice(minSlice - 1), WithGroup(strings.Repeat("g", 257)), WithIdleRelease(minIdleRelease - 1)}
		c.opts = append(c.opts, bad[rng.IntN(len(bad))])
		c.badOption = true
	}
	rng.Shuffle(len(c.opts), func(i, j int) { c.opts[i], c.opts[j] = c.opts[j], c.opts[i] })
	return c
}

// stressPick returns an index drawn with the given weights.
func stressPick(rng *rand.Rand, weights []int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := rng.IntN(total)
	for i, w := range weights {
		if n < w {
			return i
		}
		n -= w
	}
	panic("unreachable")
}

// runRun calls Run for c and records its return, or its goroutine's
// runtime.Goexit when fn ran on it.
func (c *stressCall) runRun() {
	returned := false
	defer func() {
		if !returned {
			c.goexited = true
			c.end(nil)
		}
	}()
	err := c.r.s.Run(c.ctx, c.fn, c.opts...)
	returned = true
	c.end(err)
}

// end records that the call returned err.
func (c *stressCall) end(err error) {
	c.result = err
	c.ctxErr = c.ctx.Err()
	c.ends.Add(1)
	c.r.m.returned.Add(1)
	if c.idle {
		c.r.idleReturned.Add(1)
	}
	if c.ctxKind == ctxCancelAfter {
		c.cancel()
	}
}

// fn is the task's function.
func (c *stressCall) fn(task *Task) (err error) {
	c.ran++
	c.r.m.noteThread(c, "began", task)
	defer func() { c.r.m.noteThread(c, "ended", task) }()
	switch c.body {
	case bodyError:
		err = errStressTask
	case bodyPanic:
		c.panicked = c.panicWith
		panic(c.panicWith)
	case bodyGoexit:
		c.goexit = true
		runtime.Goexit()
	case bodySpin:
		err = c.spin(task, c.spinFor)
	case bodyCall:
		for end := time.Now().Add(c.spinFor); time.Now().Before(end); {
		}
		err = c.checkpoint(task)
	case bodyBlocking:
		task.Blocking(func() { time.Sleep(c.sleepFor) })
		err = c.checkpoint(task)
	case bodyBlockingPanic:
		task.Blocking(func() {
			c.panicked = c.panicWith
			panic(c.panicWith)
		})
	case bodyNestedBlocking:
		task.Blocking(func() {
			task.Blocking(func() { time.Sleep(c.sleepFor / 2) })
			time.Sleep(c.sleepFor / 2)
		})
		err = c.checkpoint(task)
	case bodyCheckpointInBlocking:
		task.Blocking(func() {
			for range 3 {
				if err = c.checkpoint(task); err != nil {
					return
				}
				time.Sleep(c.sleepFor / 3)
			}
		})
	case bodyCancelSelf:
		c.cancel()
		err = c.spin(task, c.spinFor)
	case bodySleep:
		if err = c.spin(task, c.spinFor/2); err == nil {
			time.Sleep(c.sleepFor)
			err = c.spin(task, c.spinFor/2)
		}
	case bodyMixed:
		if err = c.spin(task, c.spinFor/2); err == nil {
			task.Blocking(func() { time.Sleep(c.sleepFor) })
			err = c.spin(task, c.spinFor/2)
		}
	case bodyContext:
		err = c.spin(task, c.spinFor)
		if tctx := task.Context(); err == nil && tctx.Err() != nil {
			err = context.Cause(tctx)
			c.checkCancelError("context.Cause(Task.Context())", err)
		}
	case bodyUntilClosed:
		close(c.started)
		for {
			if err = c.checkpoint(task); err != nil {
				break
			}
			task.Blocking(func() { time.Sleep(200 * time.Microsecond) })
		}
	}
	c.returned = err
	return err
}

// spin burns the CPU for d, calling Checkpoint all along.
func (c *stressCall) spin(task *Task, d time.Duration) error {
	for end := time.Now().Add(d); time.Now().Before(end); {
		if err := c.checkpoint(task); err != nil {
			return err
		}
	}
	return nil
}

// checkpoint calls Checkpoint and checks its error.
func (c *stressCall) checkpoint(task *Task) error {
	err := task.Checkpoint()
	if err != nil {
		c.checkCancelError("Checkpoint", err)
	}
	return err
}

// checkCancelError checks an error that says the task was cancelled: its
// context's error, or ErrClosed once a Close that may give up has begun.
func (c *stressCall) checkCancelError(what string, err error) {
	if err != c.ctx.Err() && (err != ErrClosed || !c.r.killable.Load()) {
		c.r.errorf("%s: %s = %v, but ctx.Err() = %v and no Close may have given up", c, what, err, c.ctx.Err())
	}
}
