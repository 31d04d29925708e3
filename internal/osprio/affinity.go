package osprio

// CPU affinity, for hand-offs between threads: a thread about to sleep
// pins the thread it wakes to its own CPU (PinThread), and the woken
// thread puts its own mask back (Affinity.Restore, or SetThread from
// another thread).

// CPU returns the CPU the calling thread runs on now, or -1 where that
// cannot be read (not Linux).
func CPU() int { return cpu() }

// Affinity is a thread's CPU mask, as ReadAffinity read it.
type Affinity struct{ set cpuSet }

// ReadAffinity reads the calling thread's CPU mask into a and reports
// whether it could (false where affinity is not supported).
func (a *Affinity) ReadAffinity() bool { return readAffinity(&a.set) }

// Restore sets the calling thread's CPU mask to a.
func (a *Affinity) Restore() error { return writeAffinity(&a.set) }

// SetThread sets thread tid's CPU mask (tid of this process) to a.
func (a *Affinity) SetThread(tid int) error { return writeAffinityOf(tid, &a.set) }

// CPUs lists the CPUs of a, in order.
func (a *Affinity) CPUs() []int { return cpusOf(&a.set) }

// ProcessCPUs lists, in order, the CPUs the process may run on: those in
// the mask of the calling thread or of the process's main thread. A pin
// (PinThread) narrows one thread's mask for a while, to a CPU inside the
// process's; the kernel keeps every mask inside the process's cpuset. nil
// where affinity is not supported.
func ProcessCPUs() []int { return processCPUs() }

// PinThread sets thread tid's CPU mask (tid of this process; 0: the
// calling thread) to cpu alone. The caller must make sure that thread
// restores its mask when it runs.
func PinThread(tid, cpu int) error { return pinThread(tid, cpu) }
