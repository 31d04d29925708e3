// Package routeledger keeps the counters of a Scheduler's routes for as
// long as the Scheduler lives, whether the wrappers and handlers that
// count them do or not: promsched's route counters
// (cpusched_route_requests_total and the others) must never go back, and
// a router rebuilt on a reload drops its old wrappers while the Scheduler
// goes on.
//
// How. Each counting owner (an httpsched handler of a named route, an
// Auto wrapper's table) takes a Block from its Scheduler's Ledger and
// counts into it; the Ledger holds every Block strongly and its owner
// weakly. Totals adds up every Block, its owner alive or not, so a scrape
// never misses an owner that has just gone: a Block whose owner is gone
// has its last counts (nothing else can write to it), and is folded into
// its route's totals and dropped, so memory stays with the live owners
// and the route names. Counting reads no lock: a Block's fields are
// atomic.
package routeledger

import (
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/schedmap"
)

// NumShed is the number of reasons a handler sheds a request for
// (httpsched's ShedCounts, in its order).
const NumShed = 4

// maxNames bounds the route names whose folded totals a Ledger keeps;
// past it, a gone owner's counts go to Overflow. Each wrapper bounds its
// own routes (WithMaxRoutes), so only a program that names ever new
// routes across its wrappers reaches it.
const maxNames = 4096

// Overflow is the route the counts of new names past maxNames are folded
// into; the wrappers give the routes past their bound the same name
// (autoroute.OtherRoute is this constant).
const Overflow = "(other)"

// Block is one owner's counters of one route. An Auto table counts
// Requests and Moves; an httpsched handler OverrunWait and Shed.
type Block struct {
	Requests, Moves atomic.Uint64
	OverrunWait     atomic.Int64 // ns
	Shed            [NumShed]atomic.Uint64
}

// Totals are a route's counters added up.
type Totals struct {
	Requests, Moves uint64
	OverrunWait     time.Duration
	Shed            [NumShed]uint64
	// Table and Handler say whether an Auto table, and a handler of the
	// route's own, have counted it: the series a route has.
	Table, Handler bool
}

// Kind says which counters an owner's Block counts.
type Kind uint8

const (
	KindTable   Kind = iota // an Auto table's route: Requests, Moves
	KindHandler             // a route's handler: OverrunWait, Shed
)

// Ledger is one Scheduler's route counters. Its methods are safe for
// concurrent use.
type Ledger struct {
	mu      sync.Mutex
	entries []entry
	folded  map[string]*Totals
	live    int // entries alive at the last sweep
}

type entry struct {
	name  string
	kind  Kind
	alive func() bool
	block *Block
}

var ledgers schedmap.Map[*Ledger]

// For returns s's Ledger, made at the first call for s.
func For(s *cpusched.Scheduler) *Ledger {
	return ledgers.For(s, func(weak.Pointer[cpusched.Scheduler]) *Ledger { return &Ledger{folded: map[string]*Totals{}} })
}

// Add returns a new Block for route name, counted as kind, whose owner
// is owner: held weakly, the Block folded into the route's totals once
// owner is gone. owner must be the only way to the code that writes to
// the Block.
func Add[T any](l *Ledger, owner *T, name string, kind Kind) *Block {
	p := weak.Make(owner)
	b := new(Block)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.entries) >= 2*l.live+64 {
		l.sweepLocked()
	}
	l.entries = append(l.entries, entry{name: name, kind: kind, alive: func() bool { return p.Value() != nil }, block: b})
	return b
}

// Totals returns the counters of every route that has had a Block, by
// name: its live owners' counts so far and its gone owners' last.
func (l *Ledger) Totals() map[string]Totals {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweepLocked()
	out := make(map[string]Totals, len(l.folded)+len(l.entries))
	for name, t := range l.folded {
		out[name] = *t
	}
	for _, e := range l.entries {
		t := out[e.name]
		addBlock(&t, e.kind, e.block)
		out[e.name] = t
	}
	return out
}

// sweepLocked folds the Blocks whose owners are gone into their routes'
// totals and drops them.
func (l *Ledger) sweepLocked() {
	kept := l.entries[:0]
	for _, e := range l.entries {
		if e.alive() {
			kept = append(kept, e)
			continue
		}
		name := e.name
		t := l.folded[name]
		if t == nil {
			if len(l.folded) >= maxNames {
				name = Overflow
				t = l.folded[name]
			}
			if t == nil {
				t = new(Totals)
				l.folded[name] = t
			}
		}
		addBlock(t, e.kind, e.block)
	}
	clear(l.entries[len(kept):]) // drop the gone Blocks
	l.entries = kept
	l.live = len(kept)
}

// addBlock adds b's counts, counted as kind, to t.
func addBlock(t *Totals, kind Kind, b *Block) {
	switch kind {
	case KindTable:
		t.Table = true
		t.Requests += b.Requests.Load()
		t.Moves += b.Moves.Load()
	case KindHandler:
		t.Handler = true
		t.OverrunWait += time.Duration(b.OverrunWait.Load())
		for i := range t.Shed {
			t.Shed[i] += b.Shed[i].Load()
		}
	}
}

// Load returns s's Ledger and true, or nil and false if none was made.
func Load(s *cpusched.Scheduler) (*Ledger, bool) { return ledgers.Load(s) }
