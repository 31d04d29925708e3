// Package tailtrace attributes a probe's slow requests to their causes,
// from a runtime/trace of the server that answered them.
//
// The probe is the demo server's /delay endpoint: the handler goroutine
// starts a sleeper goroutine, the sleeper waits on a 1 ms timer and wakes
// the handler, which answers. While a trace is recorded, each request is a
// trace task (demo.ProbeTaskType) whose log carries its sequence number,
// and the client knows each request's latency by that number (the
// response's demo.ProbeSeqHeader), so a slow request as the client saw it
// can be found in the trace.
//
// A request's server span runs from the moment its connection goroutine
// became runnable (the network poller saw the request), or from the send
// if it was ready before (a keep-alive connection that did not wait for
// the next request), to the moment that goroutine waited again (the
// response written). Along the span, Analyze follows the goroutine the
// request waits for: the handler, or the sleeper while the handler waits
// for it. Each stretch of time is charged to one Cause by that goroutine's
// state: running, runnable (and then by what held the Ps), in a system
// call, waiting for its timer (the sleep itself, then the timer's
// lateness), or blocked otherwise. Time inside a stop-the-world pause goes
// to CauseGCStop, running time inside a mark assist to CauseGCAssist. What
// the client measured beyond the span is CauseOutside: the client itself,
// the loopback and the time before the network poller noticed the request;
// with a clock snapshot in the trace it is split into the client's part,
// inbound and outbound. Some causes have parts of their own (Sub): inbound
// while no thread could wait in the network poller, and the like.
package tailtrace

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	xtrace "golang.org/x/exp/trace"
)

// Cause is where part of a request's time went.
type Cause int

// The causes, in the order reports list them.
const (
	CauseClientLate      Cause = iota // the client sent the request after its due time (closed loop: its own delay before the send)
	CauseInbound                      // sent until the server's poller made the handler runnable
	CauseOutbound                     // response written until the client had read it
	CauseOutside                      // client and loopback, when the trace has no clock snapshot
	CauseRunnableOnWkr                // runnable, queued on a P a worker held (or was being handed)
	CauseRunnableHandoff              // runnable while a P was being handed to a worker thread that had not yet run
	CauseRunnableBusy                 // runnable, every P held by a goroutine
	CauseRunnableIdleP                // runnable while some P had no goroutine (wake-up latency)
	CauseGCStop                       // inside a stop-the-world pause
	CauseGCAssist                     // running a GC mark assist
	CauseTimerOnWkr                   // the timer fired late; its P was held by (or being handed to) a worker at the due time
	CauseTimerLate                    // the timer fired late otherwise
	CauseRunning                      // running the handler or the sleeper
	CauseSyscall                      // in a system call
	CauseBlocked                      // blocked on something other than the probe's own timer
	CauseSleep                        // the probe's own sleep (not a delay)
	numCauses
)

var causeNames = [numCauses]string{
	CauseClientLate:      "client: request sent after its due time",
	CauseInbound:         "sent until the server's poller woke the handler",
	CauseOutbound:        "response written until the client had read it",
	CauseOutside:         "outside the server's span (no clock snapshot to split it)",
	CauseRunnableOnWkr:   "runnable, queued on a P held by (or handed to) a cpusched worker",
	CauseRunnableHandoff: "runnable while a P waited for a worker thread to take it",
	CauseRunnableBusy:    "runnable, every P held (none by a worker holding its queue)",
	CauseRunnableIdleP:   "runnable while a P was idle (wake-up latency)",
	CauseGCStop:          "GC stop-the-world",
	CauseGCAssist:        "GC mark assist",
	CauseTimerOnWkr:      "timer late, its P held by (or handed to) a cpusched worker",
	CauseTimerLate:       "timer late, its P not held by a worker",
	CauseRunning:         "running (handler, sleeper)",
	CauseSyscall:         "system call",
	CauseBlocked:         "blocked (other)",
	CauseSleep:           "the handler's own sleep",
}

func (c Cause) String() string {
	if c < 0 || c >= numCauses {
		return "Cause(" + strconv.Itoa(int(c)) + ")"
	}
	return causeNames[c]
}

// Sub is a part of one Cause's time that reports show under it. The subs
// ask of the causes what the busy case's question does (the network
// poller, Ps left to the rest of the program) without changing what each
// cause holds.
type Sub int

const (
	// SubInboundNoIdleP is CauseInbound while no P was idle halfway
	// through it, so that no thread waited in the network poller: the
	// request was seen when a P ran out of work or sysmon polled.
	SubInboundNoIdleP Sub = iota
	// SubBusyWorkers is CauseRunnableBusy while cpusched workers held
	// some of the Ps: the rest of the program queued for fewer of them.
	SubBusyWorkers
	// SubTimerIdleP is CauseTimerLate with its P idle at the due time:
	// the timer waited for a thread in the network poller, whose timeout
	// is in whole milliseconds, or for a thread to wake.
	SubTimerIdleP
	// SubBlockedGC is CauseBlocked while the handler waited in the
	// collector: an assist parked for work, or an assist that finished
	// the mark waiting for its termination, which stops the world.
	SubBlockedGC
	numSubs
)

// subParents and subNames are each Sub's cause and its name under it.
var (
	subParents = [numSubs]Cause{
		SubInboundNoIdleP: CauseInbound,
		SubBusyWorkers:    CauseRunnableBusy,
		SubTimerIdleP:     CauseTimerLate,
		SubBlockedGC:      CauseBlocked,
	}
	subNames = [numSubs]string{
		SubInboundNoIdleP: "of which no P idle halfway (none in the network poller)",
		SubBusyWorkers:    "of which cpusched workers held some of the Ps",
		SubTimerIdleP:     "of which its P idle at the due time (poller, wake-up)",
		SubBlockedGC:      "of which the handler waiting in the GC (assist, mark end)",
	}
)

func (s Sub) String() string {
	if s < 0 || s >= numSubs {
		return "Sub(" + strconv.Itoa(int(s)) + ")"
	}
	return subNames[s]
}

// Parent returns the Cause whose time s is part of.
func (s Sub) Parent() Cause { return subParents[s] }

// Causes returns every Cause in report order.
func Causes() []Cause {
	out := make([]Cause, numCauses)
	for i := range out {
		out[i] = Cause(i)
	}
	return out
}

// Config says what to analyze.
type Config struct {
	// TaskType and SeqCategory name the probe's trace task and the log
	// category of its sequence number (demo.ProbeTaskType,
	// demo.ProbeSeqCategory).
	TaskType, SeqCategory string
	// Sleep is what the probe handler sleeps (1 ms for /delay1ms).
	Sleep time.Duration
	// ClosedLoop says that each client latency counts from the request's
	// send, not from a due time: what CauseClientLate then holds is the
	// load generator's own delay before the send, and reports name it so.
	ClosedLoop bool
	// Threshold: a request whose client latency is above it is slow.
	Threshold time.Duration
	// Client is the client's view of each request, by sequence number.
	Client map[uint64]Client
}

// Client is the client's view of one request.
type Client struct {
	Latency    time.Duration // as the client charged it, from the request's due time
	Sent, Done time.Time     // when it was sent, and when its response had been read
}

// Wait is one stretch during which a slow request's goroutine was runnable
// and not running, with what held the Ps halfway through it.
type Wait struct {
	Who      string        // "handler" or "sleeper"
	Dur      time.Duration // how long it stayed runnable
	Cause    Cause         // one of the Runnable causes
	Workers  int           // Ps running a cpusched worker goroutine halfway through
	Others   int           // Ps running another goroutine then
	IdlePs   int           // Ps running nothing then
	Handoffs int           // Ps on their way to a worker thread that had not run yet
	Stolen   bool          // it ran on another P than the one it was queued on
	Holder   string        // what held the P it was queued on then: worker, handoff, other, nothing, or - (queued on no P)
	QueuedOn int64         // that P, or -1 (the global queue)
}

// Request is one slow request's breakdown.
type Request struct {
	Seq     uint64
	Latency time.Duration // as the client measured it
	Span    time.Duration // the server span
	// ReadyBeforeSend: the handler was runnable or running before the
	// client sent the request, so its span starts at the send.
	ReadyBeforeSend bool
	Parts           [numCauses]time.Duration // where the latency went
	Subs            [numSubs]time.Duration   // parts of some Parts (Sub)
	Main            Cause                    // the largest part other than the sleep
	Waits           []Wait                   // runnable stretches longer than 50 us
}

// Breakdown is Analyze's result.
type Breakdown struct {
	Config    Config
	Traced    int // probe tasks in the trace
	Matched   int // of those, with a client latency
	Slow      int // of those, slower than Threshold
	Requests  []Request
	TraceSpan time.Duration
	Workers   int // cpusched worker goroutines seen
	STWs      int // stop-the-world pauses in the trace
	STWMax    time.Duration
	// STWWaitMax is the longest a stop-the-world waited for one P to stop
	// (the goroutine it ran as the stop began to leave it), and
	// STWWaitWorkerMax the longest for a P a cpusched worker goroutine
	// held: a worker whose thread the kernel has left waiting holds its P
	// until it runs again (docs/measurements/busy-machine.md#turns-while-contended).
	STWWaitMax       time.Duration
	STWWaitWorkerMax time.Duration
	GCs              int // GC cycles (mark phases) begun in the trace
	Incomplete       int // slow requests whose span could not be followed (begun before the trace, ...)
	// Followed is how many matched requests, slow or not, were followed,
	// and AllParts the sum of their parts: the baseline for the slow ones.
	Followed int
	AllParts [numCauses]time.Duration
	AllSubs  [numSubs]time.Duration
	// ReadyBeforeSend is how many followed requests' handler was ready
	// before the request was sent (Request.ReadyBeforeSend).
	ReadyBeforeSend int
}

// Analyze reads a runtime/trace and breaks down every probe request slower
// than cfg.Threshold. It reads the trace twice (it is held in memory).
func Analyze(r io.Reader, cfg Config) (*Breakdown, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("tailtrace: reading the trace: %w", err)
	}
	a := &analysis{cfg: cfg, workers: map[xtrace.GoID]bool{}, probes: map[xtrace.TaskID]*probe{}, children: map[xtrace.GoID][]child{}, stacks: map[xtrace.Stack]bool{}, gcStacks: map[xtrace.Stack]bool{}}
	if err := a.scan(data, a.firstPass); err != nil {
		return nil, err
	}
	a.track = map[xtrace.GoID]*gor{}
	for _, p := range a.probes {
		if p.seq == 0 || p.end == 0 {
			continue
		}
		c, ok := cfg.Client[p.seq]
		if !ok {
			continue
		}
		p.slow = c.Latency > cfg.Threshold
		a.trackG(p.g)
		// The first goroutine the handler started within its task is the
		// sleeper; a connection's goroutine starts one per request, so
		// its creations (in time order) are searched, not scanned.
		kids := a.children[p.g]
		if i := sort.Search(len(kids), func(i int) bool { return kids[i].at >= p.begin }); i < len(kids) && kids[i].at <= p.end {
			p.sleeper = kids[i].g
			a.trackG(kids[i].g)
		}
	}
	a.procs = map[xtrace.ProcID]*procLine{}
	a.workerThreads = map[xtrace.ThreadID]bool{}
	if err := a.scan(data, a.secondPass); err != nil {
		return nil, err
	}
	return a.breakdown(), nil
}
