package report

import (
	"fmt"
	"io"
)

// ErrWriter writes to an io.Writer until a write fails, then keeps that
// error and drops every later write, so that a report can be written
// piece by piece and its error checked once, at the end. It is not safe
// for concurrent use.
type ErrWriter struct {
	w   io.Writer
	err error
}

// NewErrWriter returns an ErrWriter that writes to w.
func NewErrWriter(w io.Writer) *ErrWriter { return &ErrWriter{w: w} }

// Write writes p unless an earlier write failed, and returns the first
// error either way.
func (e *ErrWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// Printf writes as fmt.Fprintf does, unless an earlier write failed.
func (e *ErrWriter) Printf(format string, args ...any) {
	fmt.Fprintf(e, format, args...)
}

// Err returns the first write error, or nil.
func (e *ErrWriter) Err() error { return e.err }
