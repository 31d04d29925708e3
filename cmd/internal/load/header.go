// Request headers: the -H "Name: value" lines of the CLI and the checks of
// Config.Header.

package load

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// clientSetHeaders are the headers net/http's client writes from the request
// itself and drops from Request.Header (a body's length comes from
// Config.Body), so setting them could only mislead.
var clientSetHeaders = []string{"Content-Length", "Transfer-Encoding", "Trailer"}

// ParseHeaderLine splits a curl-style header line, "Name: value", into its
// name and its value with the spaces and tabs around it trimmed. It returns
// an error (which does not repeat the line; the caller quotes it) when the
// line has no colon, when the name is not an HTTP token (RFC 9110 section
// 5.6.2: no spaces, no separators such as ':' or '/'), when the value holds
// a control character other than a tab, or when the name is one the HTTP
// client sets itself (Content-Length, Transfer-Encoding, Trailer).
func ParseHeaderLine(line string) (name, value string, err error) {
	name, value, ok := strings.Cut(line, ":")
	if !ok {
		return "", "", errors.New(`no colon; want "Name: value", e.g. "X-Tenant: acme"`)
	}
	value = strings.Trim(value, " \t")
	if err := checkHeader(name, value); err != nil {
		return "", "", err
	}
	return name, value, nil
}

// checkHeader reports what is wrong with one header field, or nil.
func checkHeader(name, value string) error {
	if !isToken(name) {
		return fmt.Errorf("name %q is not a valid header name (an HTTP token: letters, digits and !#$%%&'*+-.^_`|~, no spaces)", name)
	}
	for _, set := range clientSetHeaders {
		if strings.EqualFold(name, set) {
			return fmt.Errorf("%s is set by the HTTP client, not by a header line", set)
		}
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < ' ' && c != '\t' || c == 0x7f {
			return fmt.Errorf("value of %s holds control character %q at byte %d", name, c, i)
		}
	}
	return nil
}

// checkHeaders checks every field of c.Header, in the order of its names.
func (c Config) checkHeaders(w wording) error {
	for _, name := range slices.Sorted(maps.Keys(c.Header)) {
		for _, v := range c.Header[name] {
			if err := checkHeader(name, v); err != nil {
				return errorf("%s: %w", w.name("Header", "H"), err)
			}
		}
	}
	return nil
}

// withHeader sets the fields of h on req, replacing any of the same name
// that req has (so h's User-Agent wins over the default), and h's last Host
// as req.Host (net/http sends that, not a Host field).
func withHeader(req *http.Request, h http.Header) {
	for name, values := range h {
		if strings.EqualFold(name, "Host") {
			if len(values) > 0 {
				req.Host = values[len(values)-1]
			}
			continue
		}
		req.Header[http.CanonicalHeaderKey(name)] = append([]string(nil), values...)
	}
}
