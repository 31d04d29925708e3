// Package faketree lays out files under a test's temporary directory, for
// the tests that read a fake /proc or cgroup tree (a root passed where
// production passes "/").
package faketree

import (
	"os"
	"path/filepath"
	"testing"
)

// New writes files (a path relative to a new root: its contents) under a
// new temporary directory, removed at the end of the test, and returns it.
func New(t testing.TB, files map[string]string) (root string) {
	t.Helper()
	root = t.TempDir()
	for name, content := range files {
		Write(t, root, name, content)
	}
	return root
}

// Write writes content to the file at name under root, making its
// directories; it fails the test where it cannot.
func Write(t testing.TB, root, name, content string) {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
