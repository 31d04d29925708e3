package childproc

import (
	"strings"
	"testing"
)

func TestTail(t *testing.T) {
	var tail Tail
	if got := tail.String(); got != "" {
		t.Errorf("empty: got %q", got)
	}
	tail.Write([]byte("  start\n"))
	if got := tail.String(); got != "start" {
		t.Errorf("short: got %q, want %q", got, "start")
	}
	tail.Write([]byte(strings.Repeat("x", TailSize)))
	tail.Write([]byte("end"))
	got := tail.String()
	if len(got) != TailSize || !strings.HasSuffix(got, "xend") {
		t.Errorf("long: got %d bytes ending %q, want %d ending in \"xend\"", len(got), got[max(0, len(got)-8):], TailSize)
	}
}
