// The HTTP client Run builds, which dials loopback only.

package load

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"
)

// newClient builds the keep-alive client Run uses when Config.Client is nil:
// HTTP/1.1, one idle connection kept per worker, no compression (so Bytes is
// what came over the wire), no proxy, no redirects (a 3xx counts as non-2xx),
// and, unless AllowRemote, a dialer that refuses non-loopback addresses.
func newClient(c Config) (*http.Client, *http.Transport) {
	dialer := &net.Dialer{Timeout: c.Timeout, KeepAlive: 30 * time.Second}
	if !c.AllowRemote {
		dialer.Control = func(network, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return fmt.Errorf("load: refusing to dial %s: %w", address, ErrNotLoopback)
			}
			return nil
		}
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         dialer.DialContext,
		MaxIdleConns:        c.Concurrency,
		MaxIdleConnsPerHost: c.Concurrency,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: c.Timeout,
		DisableCompression:  true,
	}
	if c.Insecure {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // #nosec: opt-in, loopback test servers
	}
	client := &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return client, tr
}
