package report

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/term"
)

// Progress is a single status line that overwrites itself ("\r" + text +
// "\x1b[K", erase to end of line) on a terminal. A disabled Progress
// writes nothing, so callers can update it unconditionally. A nil
// *Progress is disabled. Its methods are safe for concurrent use; it
// starts no goroutines.
type Progress struct {
	w       io.Writer
	enabled bool
	width   int // terminal columns; lines are cut to width-1 runes; 0 means no limit

	mu    sync.Mutex
	shown bool // a status line is on screen and Done must clear it
}

// NewProgress returns a Progress that writes to w only if w is an *os.File
// connected to a terminal; for any other writer (a pipe, a file, a buffer)
// it is disabled. Use ForceProgress to write regardless.
func NewProgress(w io.Writer) *Progress {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return &Progress{w: w}
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		width = 0
	}
	return &Progress{w: w, enabled: true, width: width}
}

// ForceProgress returns a Progress that always writes to w, without a
// width limit (for tests and for callers that know w is a terminal).
func ForceProgress(w io.Writer) *Progress {
	return &Progress{w: w, enabled: true}
}

// Set replaces the status line with fmt.Sprintf(format, args...). Line
// breaks in the text become spaces, and on a terminal the text is cut to
// fit one line so "\r" can overwrite it. Write errors are ignored: the
// status line is decoration.
func (p *Progress) Set(format string, args ...any) {
	if p == nil || !p.enabled {
		return
	}
	text := strings.NewReplacer("\r", " ", "\n", " ").Replace(fmt.Sprintf(format, args...))
	if p.width > 1 && utf8.RuneCountInString(text) > p.width-1 {
		text = string([]rune(text)[:p.width-1])
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = io.WriteString(p.w, "\r"+text+"\x1b[K")
	p.shown = true
}

// Done erases the status line, leaving the cursor at the start of the
// empty line so normal output can follow. It writes nothing if no line is
// shown; Set may be called again afterwards.
func (p *Progress) Done() {
	if p == nil || !p.enabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		_, _ = io.WriteString(p.w, "\r\x1b[K")
		p.shown = false
	}
}
