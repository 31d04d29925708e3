package bench

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCPUModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpuinfo")
	os.WriteFile(path, []byte("processor\t: 0\nvendor_id\t: X\nmodel name\t: Test  CPU @ 2.0GHz\n\nprocessor\t: 1\nmodel name\t: other\n"), 0o644)
	if got, want := cpuModel(path), "Test CPU @ 2.0GHz"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := cpuModel(filepath.Join(t.TempDir(), "missing")); got != "" {
		t.Errorf("missing file: got %q, want \"\"", got)
	}
}
