package doclinks

// The pages check: docs/ holds two kinds of page. A page a user reads
// (README.md, and every .md under docs/ but docs/measurements/) gives
// today's behaviour and figures; a commit hash belongs there only in a
// paragraph that says what was measured on it, so that the running text
// does not turn into a journal. A record page (docs/measurements/*.md)
// says first what it decided, and which commit it measured, so that a
// reader knows what rests on it before the figures.

import (
	"errors"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
)

// RecordDir is the directory, under the root, of the record pages.
const RecordDir = "docs/measurements"

// decidedPrefix opens the first paragraph of every record page.
const decidedPrefix = "**Decided:**"

// commitSpan is a commit hash in a code span: 7 to 40 lowercase hex
// digits, at least one of them a digit (`deadbeef` is a word).
var commitSpan = regexp.MustCompile("`([0-9a-f]{7,40})`")

func isCommit(s string) bool {
	return strings.ContainsAny(s, "0123456789")
}

// CheckPages returns the problems of the user and record pages under root,
// sorted by file and line.
func CheckPages(root string) ([]Problem, error) {
	c := &checker{root: root, docs: map[string]*document{}}
	user := []string{filepath.Join(root, "README.md")}
	var record []string
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path == filepath.Join(root, "docs") {
			return filepath.SkipDir // no docs/: the README alone
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		if strings.HasPrefix(c.rel(path), RecordDir+"/") {
			record = append(record, path)
		} else {
			user = append(user, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, p := range user {
		d, err := c.doc(p)
		if err != nil {
			return nil, err
		}
		c.checkUserPage(p, d)
	}
	for _, p := range record {
		d, err := c.doc(p)
		if err != nil {
			return nil, err
		}
		c.checkRecordPage(p, d)
	}
	c.sort()
	return c.problems, nil
}

// paragraphs returns the paragraphs of d outside fenced code, each as the
// index of its first line and its lines.
func paragraphs(d *document) (starts []int, paras [][]string) {
	var cur []string
	for i, line := range d.lines {
		if d.code[i] || strings.TrimSpace(line) == "" {
			if cur != nil {
				paras = append(paras, cur)
				cur = nil
			}
			continue
		}
		if cur == nil {
			starts = append(starts, i)
		}
		cur = append(cur, line)
	}
	if cur != nil {
		paras = append(paras, cur)
	}
	return starts, paras
}

// measuredOn reports whether a paragraph says what was measured on a
// commit: it begins "Measured on" (or, a table row or list item, holds it).
func measuredOn(first, line string) bool {
	return strings.HasPrefix(strings.TrimLeft(first, "-*> \t"), "Measured on") ||
		strings.Contains(strings.ToLower(line), "measured on")
}

// checkUserPage reports every commit hash outside a "Measured on"
// paragraph.
func (c *checker) checkUserPage(path string, d *document) {
	starts, paras := paragraphs(d)
	for k, para := range paras {
		for j, line := range para {
			for _, m := range commitSpan.FindAllStringSubmatch(line, -1) {
				if isCommit(m[1]) && !measuredOn(para[0], line) {
					c.report(path, starts[k]+j+1, "commit %s cited outside a \"Measured on\" paragraph (a user page gives today's figures; the history is in git and in %s/)", m[1], RecordDir)
				}
			}
		}
	}
}

// checkRecordPage reports a record page whose first paragraph after its
// title does not begin with what it decided, or whose opening (the first
// three paragraphs) names no commit.
func (c *checker) checkRecordPage(path string, d *document) {
	starts, paras := paragraphs(d)
	k := 0
	if len(paras) > 0 && strings.HasPrefix(paras[0][0], "# ") {
		k = 1
	}
	if k >= len(paras) || !strings.HasPrefix(paras[k][0], decidedPrefix) {
		line := 1
		if k < len(starts) {
			line = starts[k] + 1
		}
		c.report(path, line, "a record page opens with %q: what it decided", decidedPrefix)
		return
	}
	for _, para := range paras[k:min(k+3, len(paras))] {
		for _, m := range commitSpan.FindAllStringSubmatch(strings.Join(para, "\n"), -1) {
			if isCommit(m[1]) {
				return
			}
		}
	}
	c.report(path, starts[k]+1, "a record page names the commit it measured in its opening paragraphs")
}
