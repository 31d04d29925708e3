package tailtrace

import (
	"bytes"
	"context"
	"fmt"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	xtrace "golang.org/x/exp/trace"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testTaskType = "test.probe"
	testSeqCat   = "seq"
)

// probeTrace records a trace of n probe requests served the way the demo
// serves /delay1ms: a goroutine that waits for its request, begins a task
// that logs its sequence number, starts a sleeper on a 1 ms timer and waits
// for it. It returns the trace and each request's client view (latency from
// the send, just before the goroutine is released, to the answer, on the
// wall clock). A request 0 goes first, unrecorded: the goroutine may not
// yet wait when it is sent, and a request that did not wait cannot be
// followed.
func probeTrace(t *testing.T, n int) ([]byte, map[uint64]Client) {
	t.Helper()
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("tracing unavailable: %v", err)
	}
	clients := map[uint64]Client{}
	var mu sync.Mutex
	type request struct {
		seq  uint64
		sent time.Time
	}
	requests := make(chan request)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the connection goroutine
		defer wg.Done()
		for r := range requests {
			seq, sent := r.seq, r.sent
			ctx, task := trace.NewTask(context.Background(), testTaskType)
			trace.Log(ctx, testSeqCat, strconv.FormatUint(seq, 10))
			woke := make(chan struct{})
			go func() {
				time.Sleep(time.Millisecond)
				close(woke)
			}()
			<-woke
			task.End()
			done := time.Now()
			if seq > 0 {
				mu.Lock()
				clients[seq] = Client{Latency: done.Sub(sent), Sent: sent, Done: done}
				mu.Unlock()
			}
		}
	}()
	for seq := uint64(0); seq <= uint64(n); seq++ {
		requests <- request{seq, time.Now()}
		time.Sleep(2 * time.Millisecond) // the goroutine waits between requests
	}
	close(requests)
	wg.Wait()
	trace.Stop()
	return buf.Bytes(), clients
}

func TestAnalyzeCountsAndAccounting(t *testing.T) {
	data, clients := probeTrace(t, 20)
	// Make requests 3 and 7 slow as the client saw them: 50 ms later than
	// measured, as if the client had sent them late.
	for _, seq := range []uint64{3, 7} {
		c := clients[seq]
		c.Latency += 50 * time.Millisecond
		clients[seq] = c
	}
	delete(clients, 20) // one the client never saw answered
	b, err := Analyze(bytes.NewReader(data), Config{
		TaskType: testTaskType, SeqCategory: testSeqCat, Sleep: time.Millisecond,
		Threshold: 40 * time.Millisecond, Client: clients,
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.Traced != 20 || b.Matched != 19 || b.Slow != 2 {
		t.Fatalf("traced %d, matched %d, slow %d; want 20, 19, 2", b.Traced, b.Matched, b.Slow)
	}
	if b.Incomplete != 0 || len(b.Requests) != 2 {
		t.Fatalf("incomplete %d, followed slow %d; want 0 and 2", b.Incomplete, len(b.Requests))
	}
	for _, r := range b.Requests {
		if r.Seq != 3 && r.Seq != 7 {
			t.Errorf("slow request #%d, want only #3 and #7", r.Seq)
		}
		// The added 50 ms happened before the request was sent.
		if r.Main != CauseClientLate {
			t.Errorf("#%d: main cause %v, want %v", r.Seq, r.Main, CauseClientLate)
		}
		checkSpanSum(t, r)
		if r.Parts[CauseSleep] <= 0 || r.Parts[CauseSleep] > time.Millisecond {
			t.Errorf("#%d: sleep part %v, want in (0, 1ms]", r.Seq, r.Parts[CauseSleep])
		}
	}
	var out strings.Builder
	if err := b.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"20 probe requests traced", "19 matched", "2 slower than 40.00 ms", CauseClientLate.String(), "#3 ", "#7 "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// checkSpanSum checks that r's server parts add up to its span.
func checkSpanSum(t *testing.T, r Request) {
	t.Helper()
	var server time.Duration
	for c, d := range r.Parts {
		switch Cause(c) {
		case CauseClientLate, CauseInbound, CauseOutbound, CauseOutside:
		default:
			server += d
		}
	}
	if diff := server - r.Span; diff < -time.Microsecond || diff > time.Microsecond {
		t.Errorf("#%d: server parts sum to %v, span is %v", r.Seq, server, r.Span)
	}
}

func TestAnalyzeNoSlowRequests(t *testing.T) {
	data, clients := probeTrace(t, 5)
	b, err := Analyze(bytes.NewReader(data), Config{
		TaskType: testTaskType, SeqCategory: testSeqCat, Sleep: time.Millisecond,
		Threshold: time.Hour, Client: clients,
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.Slow != 0 || len(b.Requests) != 0 || b.Followed != 5 {
		t.Fatalf("slow %d (%d followed slow), followed %d; want 0, 0, 5", b.Slow, len(b.Requests), b.Followed)
	}
	var out strings.Builder
	if err := b.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "slowest requests") {
		t.Errorf("report lists slow requests when there are none:\n%s", out.String())
	}
}

func TestAnalyzeBadTrace(t *testing.T) {
	_, err := Analyze(strings.NewReader("not a trace"), Config{TaskType: testTaskType, SeqCategory: testSeqCat})
	if err == nil || !strings.HasPrefix(err.Error(), "tailtrace: ") {
		t.Fatalf("Analyze(garbage) = %v, want a tailtrace: error", err)
	}
}

func TestCauseString(t *testing.T) {
	for _, c := range Causes() {
		if c.String() == "" || strings.HasPrefix(c.String(), "Cause(") {
			t.Errorf("cause %d has no name", int(c))
		}
		if shortNames[c] == "" {
			t.Errorf("cause %v has no short name", c)
		}
	}
	if got := Cause(-1).String(); got != "Cause(-1)" {
		t.Errorf("Cause(-1).String() = %q", got)
	}
}

// TestGorFrom: from finds the first interval not ended by t, the open last
// one included, as follow's search of a connection's long history needs.
func TestGorFrom(t *testing.T) {
	g := &gor{iv: []interval{{start: 10, end: 20}, {start: 20, end: 30}, {start: 30}}}
	for _, c := range []struct {
		t    xtrace.Time
		want int
	}{{0, 0}, {10, 0}, {19, 0}, {20, 1}, {29, 1}, {30, 2}, {1000, 2}} {
		if got := g.from(c.t); got != c.want {
			t.Errorf("from(%d) = %d, want %d", c.t, got, c.want)
		}
	}
	if got := (&gor{}).from(5); got != 0 {
		t.Errorf("from on no intervals = %d, want 0", got)
	}
}

// TestAnalyzeSpanStartsAtSend: a request sent after its handler was
// already runnable (as a keep-alive connection's goroutine is, woken when
// the previous response's background read ends) is charged only from its
// send: no inbound part, a shorter span, the parts still adding up to it.
func TestAnalyzeSpanStartsAtSend(t *testing.T) {
	data, clients := probeTrace(t, 5)
	cfg := Config{TaskType: testTaskType, SeqCategory: testSeqCat, Sleep: time.Millisecond, Client: clients}
	before, err := Analyze(bytes.NewReader(data), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Each request is sent before its goroutine is released, but on a
	// busy machine the goroutine may come to it late, without waiting:
	// take one that waited for its send.
	var was Request
	for _, x := range before.Requests { // every request is slow at threshold 0
		if !x.ReadyBeforeSend {
			was = x
		}
	}
	if was.Seq == 0 {
		t.Skip("every request found its goroutine ready before its send: a machine too busy for this test")
	}
	// That request, as if sent halfway through its sleep.
	seq := was.Seq
	c := clients[seq]
	c.Sent = c.Done.Add(-c.Latency / 2)
	c.Latency = c.Done.Sub(c.Sent)
	clients[seq] = c
	cfg.Threshold = c.Latency - time.Microsecond
	b, err := Analyze(bytes.NewReader(data), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if b.ReadyBeforeSend != before.ReadyBeforeSend+1 {
		t.Fatalf("ready before the send: %d, want one more than the %d before", b.ReadyBeforeSend, before.ReadyBeforeSend)
	}
	var r Request
	for _, x := range b.Requests {
		if x.Seq == seq {
			r = x
		}
	}
	if !r.ReadyBeforeSend || r.Parts[CauseInbound] != 0 {
		t.Fatalf("#%d: ready before send %v, inbound %v; want true and 0", seq, r.ReadyBeforeSend, r.Parts[CauseInbound])
	}
	// The span ends as the goroutine waits again, after the client's
	// Done.
	if r.Span >= was.Span || r.Span < c.Latency-10*time.Microsecond {
		t.Errorf("#%d: span %v, want shorter than the %v before and at least the %v from its send", seq, r.Span, was.Span, c.Latency)
	}
	checkSpanSum(t, r)
	var out strings.Builder
	if err := b.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("%d followed requests found their handler ready before they were sent", b.ReadyBeforeSend)) {
		t.Errorf("report does not count the request ready before its send:\n%s", out.String())
	}
}

// TestReportNames: the client's row and the sleep's are named by what the
// Config says the load and the handler were.
func TestReportNames(t *testing.T) {
	open := &Breakdown{Config: Config{Sleep: time.Millisecond}}
	closed := &Breakdown{Config: Config{Sleep: 500 * time.Microsecond, ClosedLoop: true}}
	for _, c := range []struct {
		b     *Breakdown
		cause Cause
		want  string
	}{
		{open, CauseClientLate, CauseClientLate.String()},
		{open, CauseSleep, "the 1 ms sleep itself"},
		{closed, CauseClientLate, "client: before the request was sent (closed loop)"},
		{closed, CauseSleep, "the 500 us sleep itself"},
		{&Breakdown{}, CauseSleep, CauseSleep.String()},
		{&Breakdown{Config: Config{Sleep: 1500 * time.Nanosecond}}, CauseSleep, "the 1.5µs sleep itself"},
		{closed, CauseInbound, CauseInbound.String()},
	} {
		if got := c.b.name(c.cause); got != c.want {
			t.Errorf("%+v: name(%d) = %q, want %q", c.b.Config, int(c.cause), got, c.want)
		}
	}
}
