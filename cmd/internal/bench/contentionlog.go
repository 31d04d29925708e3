// The servers' turns to contended, read off their logs: a step that read
// contended where no neighbour ran says which rule of the guard turned
// it and on what reading, so that such a stretch can be told from a
// neighbour after the run.

package bench

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ContentionSwitch is one turn of a server's ospriority scheduler to
// contended, as its log line gives it (cpusched.WithLogger: the rule and
// the reading that decided).
type ContentionSwitch struct {
	// AtS is when the server logged it, in seconds from the start of the
	// step's measured window; negative before it (the warm-up, or the
	// settling of the step before).
	AtS float64 `json:"at_s"`
	// Rule is the guard's rule that turned it, as the library words it:
	// "others busy", "others busy in the pause", "a lowered thread
	// starved, others busy", "a lowered thread starved long".
	Rule string `json:"rule"`
	// OthersCPUs is the CPUs other processes used of the process's over
	// the guard's last reading of them, and CPUs how many it may run on.
	OthersCPUs float64 `json:"others_cpus"`
	CPUs       float64 `json:"cpus"`
	// StarvedWindows is how many windows in a row a lowered task thread
	// had starved.
	StarvedWindows int `json:"starved_windows"`
}

// contendedMsg is the start of the message the scheduler logs as it turns
// contended (enterContendedLocked in the library's contention.go).
const contendedMsg = "cpusched: other processes keep the CPUs busy"

// logWatch is a server's stderr as far as the bench reads it: it keeps the
// turns to contended, each with when it arrived. It is an io.Writer that
// splits what it is given into lines.
type logWatch struct {
	mu       sync.Mutex
	partial  []byte
	switches []loggedSwitch
}

// loggedSwitch is a ContentionSwitch with the time its line arrived.
type loggedSwitch struct {
	at time.Time
	sw ContentionSwitch
}

func (w *logWatch) Write(p []byte) (int, error) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		if sw, ok := parseContendedLine(string(w.partial[:i])); ok {
			w.switches = append(w.switches, loggedSwitch{now, sw})
		}
		w.partial = w.partial[i+1:]
	}
	if len(w.partial) > maxStderr { // a runaway line: not a log line of ours
		w.partial = w.partial[:0]
	}
	return len(p), nil
}

// between returns the turns logged after from (the zero time: since the
// server started) up to to, with AtS counted from start.
func (w *logWatch) between(from, to, start time.Time) []ContentionSwitch {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []ContentionSwitch
	for _, ls := range w.switches {
		if ls.at.After(from) && !ls.at.After(to) {
			sw := ls.sw
			sw.AtS = ls.at.Sub(start).Seconds()
			out = append(out, sw)
		}
	}
	return out
}

// parseContendedLine parses a slog text line (key=value pairs, values
// quoted where they hold spaces) whose msg is the turn to contended.
func parseContendedLine(line string) (ContentionSwitch, bool) {
	attrs := parseLogfmt(line)
	if !strings.HasPrefix(attrs["msg"], contendedMsg) {
		return ContentionSwitch{}, false
	}
	sw := ContentionSwitch{Rule: attrs["rule"]}
	sw.OthersCPUs, _ = strconv.ParseFloat(attrs["others_cpus"], 64)
	sw.CPUs, _ = strconv.ParseFloat(attrs["cpus"], 64)
	sw.StarvedWindows, _ = strconv.Atoi(attrs["starved_windows"])
	return sw, true
}

// parseLogfmt returns the key=value pairs of a slog text line; a value
// that does not parse ends the line.
func parseLogfmt(line string) map[string]string {
	attrs := map[string]string{}
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimLeft(line, " ") {
		key, rest, ok := strings.Cut(line, "=")
		if !ok || key == "" || strings.ContainsRune(key, ' ') {
			break
		}
		var value string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				break
			}
			value, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			value, rest, _ = strings.Cut(rest, " ")
		}
		attrs[key] = value
		line = rest
	}
	return attrs
}
