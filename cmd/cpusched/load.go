package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"

	"golang.org/x/term"

	"github.com/cpusched/cpusched/cmd/internal/cli"
	"github.com/cpusched/cpusched/cmd/internal/load"
)

// runLoad is `cpusched load [flags] URL`: it drives URL with closed-loop
// (-c, -n or -d) or open-loop (-rate, -d) load and prints an ab-like summary,
// or JSON with -json. On SIGINT it stops, prints the partial summary and
// exits 0.
func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("load", stderr)
	conc := fs.Int("c", load.DefaultConcurrency, fmt.Sprintf("connections (1..%d): closed loop workers, open loop max requests in flight", load.MaxConcurrency))
	requests := fs.Int("n", 0, "closed loop: total requests (>= 1); give exactly one of -n or -d")
	duration := fs.Duration("d", 0, "run for this long (> 0, e.g. 10s); give exactly one of -n or -d")
	rate := fs.Float64("rate", 0, fmt.Sprintf("open loop: requests per second (0 < rate <= %g, needs -d); latency counts from each request's due time", float64(load.MaxRate)))
	timeout := fs.Duration("timeout", load.DefaultTimeout, "per-request timeout (> 0)")
	method := fs.String("m", "GET", "HTTP method (POST where -body is given and -m is not)")
	body := fs.String("body", "", fmt.Sprintf("send this request body (at most %d bytes), e.g. -body 'user=a&pw=b', or @FILE for a file's contents; its Content-Type is application/x-www-form-urlencoded unless -H sets one, as with curl -d", load.MaxBody))
	allowRemote := fs.Bool("allow-remote", false, "allow a URL whose host is not a loopback address")
	insecure := fs.Bool("k", false, "https: skip certificate verification")
	jsonOut := fs.Bool("json", false, "print the summary as JSON instead of text")
	header := http.Header{}
	fs.Var(headerFlag(header), "H", "add `\"Name: value\"` to every request's headers, like curl -H; repeat for more (-H 'X-Tenant: acme' -H 'Accept: text/html'); Host sets the request's host")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: cpusched load [flags] URL   (flags may also follow URL)")
		fs.PrintDefaults()
	}
	urls, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(urls) != 1 {
		return cli.Usagef("need exactly one URL argument (http:// or https://), got %d", len(urls))
	}
	var bodyBytes []byte
	if cli.Given(fs, "body") {
		if bodyBytes, err = readBody(*body); err != nil {
			return err
		}
		if !cli.Given(fs, "m") {
			*method = http.MethodPost
		}
		if header.Get("Content-Type") == "" {
			header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	cfg := load.Config{
		URL:         urls[0],
		Method:      *method,
		Concurrency: *conc,
		Requests:    *requests,
		Duration:    *duration,
		Rate:        *rate,
		Timeout:     *timeout,
		AllowRemote: *allowRemote,
		Insecure:    *insecure,
		Header:      header,
		Body:        bodyBytes,
		Progress:    progressWriter(stderr),
	}
	given := func(name string) bool { return cli.Given(fs, name) }
	if err := cfg.ValidateFlags(given); err != nil {
		// main already says "cpusched load:".
		return cli.Usagef("%s", strings.TrimPrefix(err.Error(), "load: "))
	}
	res, err := load.Run(ctx, cfg)
	if res == nil {
		return err
	}
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			return err
		}
		fmt.Fprintln(stderr, "interrupted: the summary covers the requests made until then")
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res.Summary())
	}
	mode := fmt.Sprintf("closed loop, %d connections", cfg.Concurrency)
	if cfg.Rate > 0 {
		mode = fmt.Sprintf("open loop at %g req/s, up to %d connections", cfg.Rate, cfg.Concurrency)
	}
	fmt.Fprintf(stdout, "Target:  %s %s (%s)\n\n", *method, cfg.URL, mode)
	return res.WriteText(stdout)
}

// headerFlag is the -H flag: each line, "Name: value", adds a field.
type headerFlag http.Header

// String lists the fields given, one "Name: value" line each.
func (h headerFlag) String() string {
	var lines []string
	for _, name := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[name] {
			lines = append(lines, name+": "+v)
		}
	}
	return strings.Join(lines, "\n")
}

// Set adds the field of one -H line; its error says what is wrong with the
// line, which the flag package quotes.
func (h headerFlag) Set(line string) error {
	name, value, err := load.ParseHeaderLine(line)
	if err != nil {
		return err
	}
	http.Header(h).Add(name, value)
	return nil
}

// parseInterleaved parses flags that may come before and after the
// positional arguments (Go's flag package stops at the first non-flag) and
// returns the positional arguments. Everything after "--" is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := cli.Parse(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// progressWriter returns w if it is a terminal, so that the progress line
// only goes to a person watching, else nil (no progress line).
func progressWriter(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return w
	}
	return nil
}

// readBody is -body's value: the text itself, or the contents of the file
// named after an @, at most load.MaxBody bytes either way.
func readBody(v string) ([]byte, error) {
	name, isFile := strings.CutPrefix(v, "@")
	if !isFile {
		if len(v) > load.MaxBody {
			return nil, cli.Usagef("-body is %d bytes, want at most %d (or @FILE)", len(v), load.MaxBody)
		}
		return []byte(v), nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, cli.Usagef("-body @%s: %v", name, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, load.MaxBody+1))
	if err != nil {
		return nil, cli.Usagef("-body @%s: %v", name, err)
	}
	if len(b) > load.MaxBody {
		return nil, cli.Usagef("-body @%s is over %d bytes", name, load.MaxBody)
	}
	return b, nil
}
