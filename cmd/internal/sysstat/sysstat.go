// Package sysstat samples /proc: the machine's CPU time breakdown and context switches, and one process's CPU time, context switches and RSS.
//
// A sample is a snapshot of cumulative kernel counters; the numbers that mean
// something are the differences between two samples, computed by
// System.Since and Process.Since. Counters that go backwards (iowait is known
// to on NO_HZ kernels) count as zero change, so a Usage never holds a
// negative or NaN value.
//
// Sysstat reads Linux's procfs only; on other systems NewReader with the
// default root fails because /proc does not exist.
package sysstat

import (
	"fmt"
	"os"
	"time"

	"github.com/prometheus/procfs"
)

// clockTick is the length of one USER_HZ tick, the unit of utime and stime
// in /proc/PID/stat. USER_HZ is 100 on every Linux architecture Go supports,
// and procfs assumes the same when it converts /proc/stat to seconds.
const clockTick = time.Second / 100

// Reader reads samples from one proc file system. The zero Reader is not
// usable; create one with NewReader. A Reader holds no open files and is
// safe for concurrent use.
type Reader struct {
	fs  procfs.FS
	now func() time.Time // stamps samples; replaced in tests
}

// NewReader returns a Reader for the proc file system mounted at procRoot;
// "" or "/proc" means the real one. Tests pass a fixture directory laid out
// like /proc (stat, PID/stat, PID/status). It fails if procRoot cannot be
// read or is not a directory.
func NewReader(procRoot string) (*Reader, error) {
	if procRoot == "" {
		procRoot = procfs.DefaultMountPoint
	}
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return nil, fmt.Errorf("sysstat: open proc root %q: %w", procRoot, err)
	}
	return &Reader{fs: fs, now: time.Now}, nil
}

// System is one sample of the whole machine's counters from /proc/stat.
type System struct {
	When            time.Time // when the sample was read
	CPU             CPUTimes  // summed over all CPUs, seconds
	CPUs            int       // number of per-cpu lines
	ContextSwitches uint64    // ctxt: context switches since boot
}

// CPUTimes is cumulative CPU time per state in seconds, as in the cpu lines
// of /proc/stat. User and Nice include guest time, as the kernel counts it.
type CPUTimes struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal float64
}

// Usage is the breakdown between two System samples in percent of the whole
// machine (like the "all" row of mpstat): 100 means every CPU was busy.
type Usage struct {
	Usr               float64 // user + nice
	Sys               float64 // system + irq + softirq
	Idle              float64 // idle
	IOWait            float64 // iowait
	Busy              float64 // 100 - Idle - IOWait (so it includes steal)
	CtxSwitchesPerSec float64 // machine-wide context switches per second
	Seconds           float64 // wall time between the samples
}

// Sample reads /proc/stat. On failure it returns the zero System and an
// error naming the file.
func (r *Reader) Sample() (System, error) {
	when := r.now()
	stat, err := r.fs.Stat()
	if err != nil {
		return System{}, fmt.Errorf("sysstat: read stat: %w", err)
	}
	c := stat.CPUTotal
	return System{
		When: when,
		CPU: CPUTimes{
			User:    c.User,
			Nice:    c.Nice,
			System:  c.System,
			Idle:    c.Idle,
			IOWait:  c.Iowait,
			IRQ:     c.IRQ,
			SoftIRQ: c.SoftIRQ,
			Steal:   c.Steal,
		},
		CPUs:            len(stat.CPU),
		ContextSwitches: stat.ContextSwitches,
	}, nil
}

// Since returns the machine's usage between earlier and later. Each CPU
// state's change is clamped at zero; if no CPU time passed (the same sample
// twice, or samples in the wrong order) all percentages are 0. If the wall
// time between the samples is not positive, Seconds and CtxSwitchesPerSec
// are 0.
func (later System) Since(earlier System) Usage {
	user := gain(later.CPU.User, earlier.CPU.User) + gain(later.CPU.Nice, earlier.CPU.Nice)
	sys := gain(later.CPU.System, earlier.CPU.System) +
		gain(later.CPU.IRQ, earlier.CPU.IRQ) +
		gain(later.CPU.SoftIRQ, earlier.CPU.SoftIRQ)
	idle := gain(later.CPU.Idle, earlier.CPU.Idle)
	iowait := gain(later.CPU.IOWait, earlier.CPU.IOWait)
	steal := gain(later.CPU.Steal, earlier.CPU.Steal)
	total := user + sys + idle + iowait + steal

	var u Usage
	if total > 0 {
		u.Usr = 100 * user / total
		u.Sys = 100 * sys / total
		u.Idle = 100 * idle / total
		u.IOWait = 100 * iowait / total
		u.Busy = max(0, 100-u.Idle-u.IOWait)
	}
	if secs := later.When.Sub(earlier.When).Seconds(); secs > 0 {
		u.Seconds = secs
		u.CtxSwitchesPerSec = perSec(later.ContextSwitches, earlier.ContextSwitches, secs)
	}
	return u
}

// Process is one sample of a process's counters from /proc/PID/stat and
// /proc/PID/status.
type Process struct {
	When                                         time.Time     // when the sample was read
	UserCPU, SystemCPU                           time.Duration // utime, stime (10ms resolution)
	VoluntaryCtxSwitches, InvoluntaryCtxSwitches uint64        // voluntary_ctxt_switches, nonvoluntary_ctxt_switches
	RSSBytes, PeakRSSBytes                       uint64        // VmRSS, VmHWM
	Threads                                      int           // num_threads
}

// ProcessUsage is the change between two Process samples.
type ProcessUsage struct {
	UserCPU, SystemCPU time.Duration // CPU time used between the samples
	VoluntaryPerSec    float64       // voluntary context switches per second (blocking, yielding)
	InvoluntaryPerSec  float64       // involuntary context switches per second (preempted)
	Seconds            float64       // wall time between the samples
}

// CPUPercent returns the process's CPU time as a percentage of the wall time
// between the samples: 100 is one CPU fully used, 200 two. It is 0 when
// Seconds is 0.
func (u ProcessUsage) CPUPercent() float64 {
	if u.Seconds <= 0 {
		return 0
	}
	return 100 * (u.UserCPU + u.SystemCPU).Seconds() / u.Seconds
}

// Process reads /proc/PID/stat and /proc/PID/status for pid. On failure it
// returns the zero Process and an error naming the file; a process that
// exited gives an error wrapping fs.ErrNotExist.
func (r *Reader) Process(pid int) (Process, error) {
	when := r.now()
	proc, err := r.fs.Proc(pid)
	if err != nil {
		return Process{}, fmt.Errorf("sysstat: process %d: %w", pid, err)
	}
	stat, err := proc.Stat()
	if err != nil {
		return Process{}, fmt.Errorf("sysstat: read %d/stat: %w", pid, err)
	}
	status, err := proc.NewStatus()
	if err != nil {
		return Process{}, fmt.Errorf("sysstat: read %d/status: %w", pid, err)
	}
	return Process{
		When:                   when,
		UserCPU:                time.Duration(stat.UTime) * clockTick,
		SystemCPU:              time.Duration(stat.STime) * clockTick,
		VoluntaryCtxSwitches:   status.VoluntaryCtxtSwitches,
		InvoluntaryCtxSwitches: status.NonVoluntaryCtxtSwitches,
		RSSBytes:               status.VmRSS,
		PeakRSSBytes:           status.VmHWM,
		Threads:                stat.NumThreads,
	}, nil
}

// Self samples the calling process (os.Getpid()). With a fixture root it
// reads the fixture's entry for that pid, which usually does not exist.
func (r *Reader) Self() (Process, error) {
	return r.Process(os.Getpid())
}

// Since returns the change from earlier to later. CPU times and context
// switch counts that went backwards (samples of different processes, or in
// the wrong order) count as zero; if the wall time between the samples is
// not positive, Seconds and the per-second rates are 0.
func (later Process) Since(earlier Process) ProcessUsage {
	u := ProcessUsage{
		UserCPU:   max(0, later.UserCPU-earlier.UserCPU),
		SystemCPU: max(0, later.SystemCPU-earlier.SystemCPU),
	}
	if secs := later.When.Sub(earlier.When).Seconds(); secs > 0 {
		u.Seconds = secs
		u.VoluntaryPerSec = perSec(later.VoluntaryCtxSwitches, earlier.VoluntaryCtxSwitches, secs)
		u.InvoluntaryPerSec = perSec(later.InvoluntaryCtxSwitches, earlier.InvoluntaryCtxSwitches, secs)
	}
	return u
}

// gain is the growth of a cumulative counter, zero if it went backwards.
func gain(later, earlier float64) float64 {
	return max(0, later-earlier)
}

// perSec is the growth of a cumulative count per second of secs > 0, zero
// if the count went backwards.
func perSec(later, earlier uint64, secs float64) float64 {
	if later <= earlier {
		return 0
	}
	return float64(later-earlier) / secs
}
