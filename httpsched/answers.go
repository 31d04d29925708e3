package httpsched

// The answers the handler writes in place of h: 400, 503 and 500, through
// WithErrorHandler's function or as plain text that says nothing of the
// cause.

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/loadreport"
)

// ErrWaitLimit is the cause, as WithErrorHandler's function gets it, of a
// 503 answered because as many of the handler's requests were in flight as
// WithMaxQueueWait's limit allows.
var ErrWaitLimit = errors.New("httpsched: the route's requests in flight are at WithMaxQueueWait's limit")

// notStarted answers request sr, whose task never started, with err.
func (h *handler) notStarted(w http.ResponseWriter, r *http.Request, err error, sr *scheduledRequest) {
	waited, cancelled := h.cfg.now()-sr.queuedAt, r.Context().Err() != nil
	if h.limit != nil {
		sr.limit.Dropped(waited-h.learnedApart(waited, sr, h.clock.sample(h.sched)), sr.round, cancelled)
	}
	switch {
	case errors.Is(err, cpusched.ErrQueueFull):
		h.shed(w, r, shedQueueFull, err)
	case errors.Is(err, cpusched.ErrClosed):
		h.shed(w, r, shedClosed, err)
	case cancelled:
		h.meter.End(loadreport.Left, waited)
		h.answer(w, r, http.StatusServiceUnavailable, err)
	default: // the scheduler refused the task (its options are checked before)
		h.meter.End(loadreport.Refused, 0)
		h.logger().Error("httpsched: the scheduler refused the request's task", "method", r.Method, "path", r.URL.Path, "err", err)
		h.answer(w, r, http.StatusInternalServerError, err)
	}
}

// shed answers 503 at once to a request that was not queued (or that
// Close removed from the queue), for reason, whose cause is err.
func (h *handler) shed(w http.ResponseWriter, r *http.Request, reason shedReason, err error) {
	h.meter.End(loadreport.Shed, 0)
	h.countShed(reason)
	h.answer(w, r, http.StatusServiceUnavailable, err)
}

// countShed counts a request shed for reason, in s's counts and in h's.
func (h *handler) countShed(reason shedReason) {
	h.sheds[reason].Add(1)
	h.counts.Shed[reason].Add(1)
}

// failed handles the error of a task that started: the handler panicked,
// or (on a hand-off thread) called runtime.Goexit.
func (h *handler) failed(w http.ResponseWriter, r *http.Request, rw *responseWriter, err error) {
	var pe *cpusched.PanicError
	if errors.As(err, &pe) {
		if pe.Value == http.ErrAbortHandler {
			panic(http.ErrAbortHandler)
		}
		h.logger().Error("httpsched: handler panicked", "method", r.Method, "path", r.URL.Path,
			"panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
	} else {
		h.logger().Error("httpsched: handler failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if rw.started {
		panic(http.ErrAbortHandler) // too late for a status: cut the response short
	}
	h.answer(w, r, http.StatusInternalServerError, err)
}

// answer writes the error answer status, whose cause is err, in place of
// h: WithErrorHandler's, or the status's text. It sets the Retry-After of
// a 503 and the load header first.
func (h *handler) answer(w http.ResponseWriter, r *http.Request, status int, err error) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", h.cfg.retryAfter)
	}
	h.addLoadHeader(w)
	if h.cfg.errorHandler == nil {
		if status == http.StatusBadRequest { // the body does not say why
			h.logger().Info("httpsched: bad request", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		http.Error(w, http.StatusText(status), status)
		return
	}
	ew := &responseWriter{ResponseWriter: w}
	h.cfg.errorHandler(ew, r, status, err)
	if !ew.started {
		w.WriteHeader(status)
	}
}

// logger returns WithLogger's logger, or slog.Default() at the time of
// logging.
func (h *handler) logger() *slog.Logger {
	if h.cfg.logger != nil {
		return h.cfg.logger
	}
	return slog.Default()
}
