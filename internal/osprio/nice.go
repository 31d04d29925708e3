package osprio

// The milder lowering: a nice value, for threads that cannot be raised
// back and may have to run beside another busy process (the cpusched
// package's hand-off threads where it lacks the privilege to raise).

// LowerNice sets the nice value of thread tid of this process (0: the
// calling thread) to n (1..19), keeping its policy. Raising a thread's
// nice value needs no privilege; lowering it back does.
func LowerNice(tid, n int) error { return lowerNice(tid, n) }

// Idle reports whether a is SCHED_IDLE, at any nice value (a thread lowered
// to a nice value and then to SCHED_IDLE keeps the nice value).
func (a Attr) Idle() bool { return a.policy == schedIdle }

// Nice returns a's nice value.
func (a Attr) Nice() int { return int(a.nice) }
