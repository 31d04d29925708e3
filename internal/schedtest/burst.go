package schedtest

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
)

// ShedBurst checks a route's WithMaxQueueWait limit through an adapter.
// On s, of one slot and no other task, it holds the slot while it sends
// n requests with burst, each on a goroutine of its own, and waits until
// each is queued or answered; those answered by then were shed at once.
// It then sends one with other, another route, and waits for it to
// queue. Last it releases the slot and waits for every answer. It
// returns how many burst's were shed at once and how many 503s all got;
// burst and other return their answer's status code. It fails the test
// if that takes 10s.
func ShedBurst(t testing.TB, s *cpusched.Scheduler, n int, burst, other func() int) (shed, n503 int) {
	t.Helper()
	release := HoldSlot(t, s)
	codes := make(chan int, n+1)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { codes <- burst() })
	}
	for deadline := time.Now().Add(10 * time.Second); s.Stats().Queued+len(codes) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("got %d queued and %d answered after 10s, want %d in all", s.Stats().Queued, len(codes), n)
		}
		time.Sleep(time.Millisecond)
	}
	shed = len(codes)
	wg.Go(func() { codes <- other() })
	WaitQueued(t, s, n-shed+1)
	release()
	wg.Wait()
	close(codes)
	for code := range codes {
		if code == http.StatusServiceUnavailable {
			n503++
		}
	}
	return shed, n503
}
