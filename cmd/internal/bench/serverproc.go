package bench

import "context"

// ServerProcess is a demo server running as a child process, started and
// stopped the way Run starts and stops its servers: for other commands that
// drive `cpusched serve` (soak).
type ServerProcess struct{ srv *server }

// StartServer runs name with args in a new process group (args must make it
// listen and print its "listening on http://HOST:PORT" line, e.g.
// "serve -addr 127.0.0.1:0"), then waits until it answers /stats with 200,
// within 10 s. On failure, or if ctx ends first, the process has been
// stopped and the error includes its stderr. On Linux the child gets SIGKILL
// if this process dies first.
func StartServer(ctx context.Context, name string, args ...string) (*ServerProcess, error) {
	srv, err := startServer(ctx, childPlace{}, name, args)
	if err != nil {
		return nil, err
	}
	return &ServerProcess{srv: srv}, nil
}

// URL is the server's base URL, http://HOST:PORT without a trailing slash.
func (p *ServerProcess) URL() string { return p.srv.url }

// Banner is what the server said about itself on its listening line, e.g.
// "isolation=ospriority workers=2 gomaxprocs=3".
func (p *ServerProcess) Banner() string { return p.srv.banner }

// PID is the server's process id.
func (p *ServerProcess) PID() int { return p.srv.cmd.Process.Pid }

// Exited is closed once the server process has exited, for whatever reason.
func (p *ServerProcess) Exited() <-chan struct{} { return p.srv.exited }

// ExitError describes how the server exited, with the end of its stderr;
// call it only after Exited is closed.
func (p *ServerProcess) ExitError() string {
	return "exit: " + errString(p.srv.waitErr) + p.srv.stderrTail()
}

// Stop ends the server: SIGTERM to its process group, SIGKILL after 3 s. It
// returns once the process has been reaped, with an error if it had to be
// killed or exited with an error (its stderr included). It is idempotent.
func (p *ServerProcess) Stop() error { return p.srv.stop() }

func errString(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}
