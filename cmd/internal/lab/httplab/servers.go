package httplab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-martini/martini"
	"github.com/valyala/fasthttp"

	"github.com/cpusched/cpusched"
)

// BodySize is the size of every response: 1 MiB, as in the seed.
const BodySize = 1 << 20

// Body returns the response body every server sends: BodySize bytes of
// 'a'..'z' repeated (the Node.js and JVM servers build the same bytes).
func Body() []byte {
	b := make([]byte, BodySize)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

// chunkSize is how much the cpusched handler writes per Blocking call.
const chunkSize = 64 << 10

// goHandler returns the http.Handler of the Go servers that use net/http.
func goHandler(name string, body []byte, sched *cpusched.Scheduler) (http.Handler, error) {
	plain := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.Write(body)
	}
	switch name {
	case "go":
		return http.HandlerFunc(plain), nil
	case "martini":
		// martini.New with a router and no logger: Classic's logger would
		// print a line per request and its static-file middleware would stat
		// a directory per request.
		m := martini.New()
		r := martini.NewRouter()
		r.Get("/", plain)
		m.Action(r.Handle)
		return m, nil
	case "gin":
		gin.SetMode(gin.ReleaseMode)
		g := gin.New()
		g.GET("/", func(c *gin.Context) { c.Data(http.StatusOK, "application/octet-stream", body) })
		return g, nil
	case "cpusched":
		// The handler runs as a cpusched task: each 64 KiB write is a
		// Blocking call (the slot is free while the socket drains) and
		// Checkpoint runs between chunks.
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			err := sched.Run(r.Context(), func(t *cpusched.Task) error {
				w.Header().Set("Content-Type", "application/octet-stream")
				w.Header().Set("Content-Length", fmt.Sprint(len(body)))
				for off := 0; off < len(body); off += chunkSize {
					chunk := body[off:min(off+chunkSize, len(body))]
					var werr error
					t.Blocking(func() { _, werr = w.Write(chunk) })
					if werr != nil {
						return werr
					}
					if err := t.Checkpoint(); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil && !errors.Is(err, context.Canceled) {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
			}
		}), nil
	}
	return nil, fmt.Errorf("no Go handler for server %q", name)
}

// Serve runs the Go server name (one of GoServers) on addr until ctx is
// cancelled, after writing the address it listens on, and a newline, to
// stdout. It is what the child process `cpusched lab-child http NAME -addr
// ADDR` runs. It returns nil after a clean shutdown, or the error that
// stopped the server.
func Serve(ctx context.Context, name, addr string, stdout io.Writer) error {
	body := Body()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	if name == "fasthttp" {
		srv := &fasthttp.Server{
			Handler: func(c *fasthttp.RequestCtx) {
				c.SetContentType("application/octet-stream")
				c.SetBody(body)
			},
			Name:              "lab",
			NoDefaultDate:     true,
			ReduceMemoryUsage: false,
		}
		return serveUntil(ctx, ln, stdout, srv.Serve, srv.ShutdownWithContext)
	}
	var sched *cpusched.Scheduler
	if name == "cpusched" {
		if sched, err = cpusched.New(); err != nil {
			return err
		}
		defer sched.Close(context.Background())
	}
	h, err := goHandler(name, body, sched)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	return serveUntil(ctx, ln, stdout, srv.Serve, srv.Shutdown)
}

// serveUntil prints the listener's address (the parent reads it), serves
// on ln until ctx ends, then shuts down within 2 s.
func serveUntil(ctx context.Context, ln net.Listener, stdout io.Writer, serve func(net.Listener) error, shutdown func(context.Context) error) error {
	if _, err := fmt.Fprintln(stdout, ln.Addr().String()); err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = shutdown(sctx)
		<-errc
		return nil
	}
}

// nodeSource is the Node.js server: the same 1 MiB on every request,
// listening on an ephemeral loopback port that it prints.
const nodeSource = `const http = require('http');
const body = Buffer.alloc(1 << 20);
for (let i = 0; i < body.length; i++) body[i] = 97 + (i % 26);
const server = http.createServer((req, res) => {
  res.writeHead(200, {'Content-Type': 'application/octet-stream', 'Content-Length': body.length});
  res.end(body);
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => { console.log('127.0.0.1:' + server.address().port); });
process.on('SIGTERM', () => process.exit(0));
`

// javaSource is the JVM server on the JDK's com.sun.net.httpserver with a
// fixed thread pool (its size is args[0]).
const javaSource = `import com.sun.net.httpserver.HttpServer;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.util.concurrent.Executors;

public class Server {
    public static void main(String[] args) throws Exception {
        final byte[] body = new byte[1 << 20];
        for (int i = 0; i < body.length; i++) body[i] = (byte) ('a' + i % 26);
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 1024);
        server.createContext("/", ex -> {
            ex.getRequestBody().readAllBytes();
            ex.getResponseHeaders().set("Content-Type", "application/octet-stream");
            ex.sendResponseHeaders(200, body.length);
            try (OutputStream out = ex.getResponseBody()) { out.write(body); }
        });
        server.setExecutor(Executors.newFixedThreadPool(Integer.parseInt(args[0])));
        server.start();
        System.out.println("127.0.0.1:" + server.getAddress().getPort());
        System.out.flush();
    }
}
`
