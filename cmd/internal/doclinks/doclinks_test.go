package doclinks

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeTree writes files (path relative to the tree, with forward slashes,
// to content) under a new temporary directory and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// check runs Check on a tree of files and returns its problems as strings.
func check(t *testing.T, files map[string]string) []string {
	t.Helper()
	return problemsOf(t, Check, files)
}

// problemsOf runs fn (Check or CheckPages) on a tree of files and returns its
// problems as strings.
func problemsOf(t *testing.T, fn func(string) ([]Problem, error), files map[string]string) []string {
	t.Helper()
	problems, err := fn(writeTree(t, files))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	return got
}

// target is a document the tests link to.
const target = "# Target\n" +
	"\n" +
	"## Setup\n" +
	"\n" +
	"## Setup\n" +
	"\n" +
	"```\n" +
	"## In a fence\n" +
	"```\n" +
	"\n" +
	"## Slice (`OSPrioritySlice`)\n" +
	"\n" +
	"## The ab check's max\n"

func TestMarkdownLinks(t *testing.T) {
	for _, tc := range []struct {
		name string
		link string
		want string // the problem, "" for none
	}{
		{"a good link", "[t](docs/target.md)", ""},
		{"a good anchor", "[t](docs/target.md#setup)", ""},
		{"an anchor with code and an apostrophe", "[t](docs/target.md#slice-ospriorityslice) [u](docs/target.md#the-ab-checks-max)", ""},
		{"a directory", "[t](docs/)", ""},
		{"a link to another site", "[t](https://example.com/missing.md#nowhere)", ""},
		{"a link in a code span", "`[t](missing.md)`", ""},
		{"a link text wrapped across lines", "[two\nlines](docs/target.md#setup)", ""},
		{"a missing file", "[t](docs/missing.md)", `README.md:1: link "docs/missing.md": no file docs/missing.md`},
		{"a missing anchor", "[t](docs/target.md#teardown)", `README.md:1: link "docs/target.md#teardown": no heading with anchor #teardown in docs/target.md`},
		{"a duplicate heading's anchor", "[t](docs/target.md#setup-1)", ""},
		{"a duplicate heading's anchor past the last", "[t](docs/target.md#setup-2)", `README.md:1: link "docs/target.md#setup-2": no heading with anchor #setup-2 in docs/target.md`},
		{"a heading inside a code fence", "[t](docs/target.md#in-a-fence)", `README.md:1: link "docs/target.md#in-a-fence": no heading with anchor #in-a-fence in docs/target.md`},
		{"an anchor of the same file", "# Top\n\n[t](#top) [u](#bottom)", `README.md:3: link "#bottom": no heading with anchor #bottom in README.md`},
		{"a reference definition", "[t][r]\n\n[r]: docs/nothing.md", `README.md:3: link "docs/nothing.md": no file docs/nothing.md`},
		{"a link inside a code fence", "```\n[t](missing.md)\n```", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := check(t, map[string]string{"README.md": tc.link + "\n", "docs/target.md": target})
			var want []string
			if tc.want != "" {
				want = []string{tc.want}
			}
			if !slices.Equal(got, want) {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

func TestRelativeToTheLinkingFile(t *testing.T) {
	got := check(t, map[string]string{
		"docs/a.md":     "[b](b.md#b) [lab](lab/c.md) [up](../README.md) [no](README.md)\n",
		"docs/b.md":     "# B\n",
		"docs/lab/c.md": "[a](../a.md)\n",
		"README.md":     "x\n",
	})
	want := []string{`docs/a.md:1: link "README.md": no file docs/README.md`}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestGoCitations(t *testing.T) {
	src := `package p

// Wrapped across lines (docs/target.md, "The ab check's
// max") and cited by anchor (docs/target.md#setup-1).
const a = 1

/*
Cited in a block comment: docs/target.md, "Slice (OSPrioritySlice)".
*/
const b = 2

// A heading that is gone (docs/target.md, "Thread
// setting"), an anchor that is gone (docs/target.md#teardown), a file
// that is gone (docs/gone.md), a heading in a fence (docs/target.md,
// "In a fence").
const c = 3

// The case of the quoted heading does not matter: docs/target.md, "the AB check's MAX".
var s = "docs/missing.md in a string is not a comment"
`
	got := check(t, map[string]string{
		"docs/target.md":           target,
		"p/p.go":                   src,
		"p/testdata/skipped.go":    "package p // docs/skipped.md\n",
		"nested/module/q/q.go":     "package q // docs/target.md, \"Target\" and docs/target.md#nowhere\n",
		"nested/module/q/q_doc.go": "// Package q: docs/target.md, \"Setup\".\npackage q\n",
	})
	// The quoted-heading form is reported even where the heading exists,
	// with the anchor to cite instead: one form for every comment.
	want := []string{
		`nested/module/q/q.go:1: docs/target.md, "Target": cite it as docs/target.md#target, the one form`,
		`nested/module/q/q.go:1: docs/target.md#nowhere: no heading with anchor #nowhere in docs/target.md`,
		`nested/module/q/q_doc.go:1: docs/target.md, "Setup": cite it as docs/target.md#setup, the one form`,
		`p/p.go:3: docs/target.md, "The ab check's max": cite it as docs/target.md#the-ab-checks-max, the one form`,
		`p/p.go:8: docs/target.md, "Slice (OSPrioritySlice)": cite it as docs/target.md#slice-ospriorityslice, the one form`,
		`p/p.go:12: docs/target.md, "Thread setting": no heading "Thread setting" in docs/target.md`,
		`p/p.go:13: docs/target.md#teardown: no heading with anchor #teardown in docs/target.md`,
		`p/p.go:14: docs/gone.md: no file docs/gone.md`,
		`p/p.go:14: docs/target.md, "In a fence": no heading "In a fence" in docs/target.md`,
		`p/p.go:18: docs/target.md, "the AB check's MAX": cite it as docs/target.md#the-ab-checks-max, the one form`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// checkMapping checks that f maps each key of cases to its value.
func checkMapping(t *testing.T, name string, f func(string) string, cases map[string]string) {
	t.Helper()
	for in, want := range cases {
		if got := f(in); got != want {
			t.Errorf("%s(%q) = %q, want %q", name, in, got, want)
		}
	}
}

func TestAnchor(t *testing.T) {
	checkMapping(t, "Anchor", Anchor, map[string]string{
		"Current table":                                    "current-table",
		"How ospriority's settings were chosen":            "how-osprioritys-settings-were-chosen",
		"Shedding under load (httpsched.WithMaxQueueWait)": "shedding-under-load-httpschedwithmaxqueuewait",
		"A task's life, as a user sees it":                 "a-tasks-life-as-a-user-sees-it",
		"The 2b604e0 run: 1.5 us / 2 ms":                   "the-2b604e0-run-15-us--2-ms",
		"snake_case and kebab-case":                        "snake_case-and-kebab-case",
		"Écoute":                                           "écoute",
	})
	checkMapping(t, "headingText", headingText, map[string]string{
		"Slice (`OSPrioritySlice`)":     "Slice (OSPrioritySlice)",
		"The [bench](bench.md) command": "The bench command",
		"**Bold** and _emphasis_":       "Bold and emphasis",
		"snake_case stays":              "snake_case stays",
	})
}

// TestRepositoryLinks checks the repository this test is in.
func TestRepositoryLinks(t *testing.T) {
	problems, err := Check(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// checkPages runs CheckPages on a tree of files and returns its problems
// as strings.
func checkPages(t *testing.T, files map[string]string) []string {
	t.Helper()
	return problemsOf(t, CheckPages, files)
}

func TestPages(t *testing.T) {
	const record = "# A record\n\n**Decided:** this.\n\nMeasured on `abc1234`, a day.\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"a commit in a Measured on paragraph", map[string]string{
			"README.md":    "# R\n\nMeasured on `99aa3da`, 2026-12-03:\nthe figures `0849477`.\n",
			"docs/user.md": "| run | x |\n|---|---|\n| measured on `abc1234` | 1 |\n\n```\ngit show a7b8435c\n```\n",
		}, nil},
		{"a commit in running text", map[string]string{
			"README.md":     "# R\n",
			"docs/lab/l.md": "# L\n\nSince `397976e` Checkpoint tests a byte.\n",
		}, []string{`docs/lab/l.md:3: commit 397976e cited outside a "Measured on" paragraph (a user page gives today's figures; the history is in git and in docs/measurements/)`}},
		{"hex that is not a commit", map[string]string{
			"README.md": "# R\n\nThe words `deadbeef` and `cafebabe` are not commits.\n",
		}, nil},
		{"record pages", map[string]string{
			"README.md":                 "# R\n",
			"docs/measurements/ok.md":   record,
			"docs/measurements/hash.md": "# H\n\n**Decided:** that, since `0849a77`.\n",
			"docs/measurements/no.md":   "# N\n\nThe question: why.\n\n**Decided:** later.\n",
			"docs/measurements/nc.md":   "# C\n\n**Decided:** this.\n\nNo commit.\n",
		}, []string{
			`docs/measurements/nc.md:3: a record page names the commit it measured in its opening paragraphs`,
			`docs/measurements/no.md:3: a record page opens with "**Decided:**": what it decided`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkPages(t, tc.files); !slices.Equal(got, tc.want) {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestRepositoryPages checks the repository's user and record pages.
func TestRepositoryPages(t *testing.T) {
	problems, err := CheckPages(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// repoRoot returns the repository's root: the directory above the test's
// that holds go.work.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work in any directory above the test's")
		}
		dir = parent
	}
}
