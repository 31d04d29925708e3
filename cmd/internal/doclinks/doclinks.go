// Package doclinks is CI's checker of the repository's documents: .ci/run
// runs its TestRepositoryLinks and TestRepositoryPages, so that a renamed
// heading, a moved document or a journal creeping into a user's page fails
// CI instead of a reader. It is a test helper, not part of the library or
// of the cpusched command. Check's rules:
//
//   - every relative link in every Markdown file, [text](path) or
//     [text](path#anchor), links to an anchor of the same file
//     ([text](#anchor)) and reference definitions ([ref]: path) included,
//     must point at a file or directory that exists, and an anchor into a
//     .md file at a heading whose GitHub anchor equals it;
//   - in the comments of every .go file, every path of a Markdown file
//     under the root's docs directory, written from the root and followed
//     by an optional #anchor, must name an existing file and anchor; the
//     older form, the path followed by a comma and a quoted heading (which
//     may be wrapped across comment lines), is reported with the #anchor
//     to write instead, or as a missing heading.
//
// Links with a scheme (https:, mailto:) are not followed, and directories
// named testdata, vendor, node_modules or .git are not read. Headings are
// ATX headings (# to ######) outside fenced code blocks; their anchors
// follow GitHub's rule: the rendered text lowercased, every character but
// letters, digits, spaces, '-' and '_' removed, each space turned into '-',
// and -1, -2, ... added to the second, third, ... heading with the same
// anchor. CheckPages' rules are in pages.go.
//
// TestRepositoryLinks runs Check, and TestRepositoryPages CheckPages, on
// the repository's root, the directory holding go.work.
package doclinks

import (
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// A Problem is one broken reference.
type Problem struct {
	File string // relative to the checked root, with forward slashes
	Line int    // 1-based
	What string // what is missing
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.What)
}

// skipDirs are directories Check does not descend into.
var skipDirs = map[string]bool{
	".git":         true,
	"testdata":     true,
	"node_modules": true,
	"vendor":       true,
}

// Check walks the tree at root and returns its broken references, sorted by
// file and line. The error is for a tree it could not read.
func Check(root string) ([]Problem, error) {
	c := &checker{root: root, docs: map[string]*document{}}
	var mdFiles, goFiles []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".md"):
			mdFiles = append(mdFiles, path)
		case strings.HasSuffix(path, ".go"):
			goFiles = append(goFiles, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, f := range mdFiles {
		if err := c.checkMarkdown(f); err != nil {
			return nil, err
		}
	}
	for _, f := range goFiles {
		if err := c.checkGo(f); err != nil {
			return nil, err
		}
	}
	c.sort()
	return c.problems, nil
}

// sort orders the problems by file and line.
func (c *checker) sort() {
	sort.SliceStable(c.problems, func(i, j int) bool {
		a, b := c.problems[i], c.problems[j]
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Line < b.Line
	})
}

type checker struct {
	root     string
	docs     map[string]*document // by absolute path
	problems []Problem
}

func (c *checker) report(path string, line int, format string, args ...any) {
	c.problems = append(c.problems, Problem{File: c.rel(path), Line: line, What: fmt.Sprintf(format, args...)})
}

func (c *checker) rel(path string) string {
	r, err := filepath.Rel(c.root, path)
	if err != nil {
		return filepath.ToSlash(path)
	}
	return filepath.ToSlash(r)
}

// A document is a Markdown file's headings.
type document struct {
	anchors map[string]bool // GitHub anchors, duplicates numbered
	titles  map[string]bool // heading texts, lowercased, spaces folded
	lines   []string
	code    []bool // lines[i] is inside a fenced code block (or is a fence)
}

// doc reads and parses the Markdown file at path once.
func (c *checker) doc(path string) (*document, error) {
	if d, ok := c.docs[path]; ok {
		return d, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := parseMarkdown(string(b))
	c.docs[path] = d
	return d, nil
}

var atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)

func parseMarkdown(text string) *document {
	d := &document{anchors: map[string]bool{}, titles: map[string]bool{}}
	d.lines = strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	d.code = make([]bool, len(d.lines))
	seen := map[string]int{}
	var fence string // the open fence's marker, "" outside one
	for i, line := range d.lines {
		trimmed := strings.TrimLeft(line, " \t")
		if fence != "" {
			d.code[i] = true
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" \t") == "" {
				fence = ""
			}
			continue
		}
		if m := fenceMarker(trimmed); m != "" {
			d.code[i] = true
			fence = m
			continue
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		title := headingText(m[1])
		d.titles[foldTitle(title)] = true
		a := Anchor(title)
		if n, dup := seen[a]; dup {
			seen[a] = n + 1
			d.anchors[fmt.Sprintf("%s-%d", a, n+1)] = true
		} else {
			seen[a] = 0
			d.anchors[a] = true
		}
	}
	return d
}

// fenceMarker returns the run of ``` or ~~~ (three or more) that opens a
// fenced code block at the start of s, or "".
func fenceMarker(s string) string {
	for _, ch := range []string{"`", "~"} {
		n := 0
		for n < len(s) && s[n:n+1] == ch {
			n++
		}
		if n >= 3 {
			if ch == "`" && strings.Contains(s[n:], "`") {
				return "" // an info string may not hold a backtick
			}
			return s[:n]
		}
	}
	return ""
}

var (
	mdLink     = regexp.MustCompile(`!?\[([^\]]*)\]\(([^)]*)\)`)
	htmlTag    = regexp.MustCompile(`</?[A-Za-z][^>]*>`)
	emphasisUS = regexp.MustCompile(`(^|[^\pL\pN])_+([^_]+?)_+([^\pL\pN]|$)`)
)

// headingText is the text GitHub renders for a heading's source: links
// become their text, code spans lose their backticks, HTML tags and
// emphasis markers go.
func headingText(src string) string {
	s := mdLink.ReplaceAllString(src, "$1")
	s = htmlTag.ReplaceAllString(s, "")
	s = strings.ReplaceAll(s, "`", "")
	s = strings.ReplaceAll(s, "*", "")
	s = emphasisUS.ReplaceAllString(s, "$1$2$3")
	return strings.TrimSpace(s)
}

func foldTitle(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}

// Anchor returns the anchor GitHub gives a heading whose rendered text is
// title (before any -1, -2 suffix for duplicates).
func Anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) ||
			unicode.IsMark(r) || unicode.IsNumber(r) || unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	linkDest  = regexp.MustCompile(`\]\(\s*<?([^)\s>]*)>?(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	refDef    = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

func (c *checker) checkMarkdown(path string) error {
	d, err := c.doc(path)
	if err != nil {
		return err
	}
	prose := make([]string, len(d.lines))
	for i, line := range d.lines {
		if !d.code[i] {
			prose[i] = line
		}
	}
	text := blankCodeSpans(strings.Join(prose, "\n"))
	for i, line := range strings.Split(text, "\n") {
		var targets []string
		if m := refDef.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, m := range linkDest.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		for _, t := range targets {
			if what := c.checkTarget(path, t); what != "" {
				c.report(path, i+1, "link %q: %s", t, what)
			}
		}
	}
	return nil
}

// blankCodeSpans replaces every code span of the Markdown text (a run of
// backticks up to the next run of the same length, within a paragraph)
// with spaces, keeping its newlines, so that nothing in it reads as a link.
func blankCodeSpans(text string) string {
	b := []byte(text)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := run(b, i)
		end := -1
		for j := i + n; j < len(b); {
			if b[j] == '\n' && j+1 < len(b) && isBlankLine(b[j+1:]) {
				break // a code span does not cross a blank line
			}
			if b[j] != '`' {
				j++
				continue
			}
			m := run(b, j)
			if m == n {
				end = j + m
				break
			}
			j += m
		}
		if end < 0 {
			i += n
			continue
		}
		for k := i; k < end; k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
		i = end
	}
	return string(b)
}

// run is the length of the run of backticks at b[i].
func run(b []byte, i int) int {
	n := 0
	for i+n < len(b) && b[i+n] == '`' {
		n++
	}
	return n
}

// isBlankLine reports whether the line at the start of b is blank.
func isBlankLine(b []byte) bool {
	for _, ch := range b {
		switch ch {
		case '\n':
			return true
		case ' ', '\t', '\r':
		default:
			return false
		}
	}
	return true
}

// checkTarget checks one link destination written in the Markdown file
// from, and says what is missing ("" when nothing is).
func (c *checker) checkTarget(from, target string) string {
	if target == "" || urlScheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return ""
	}
	p, anchor, _ := strings.Cut(target, "#")
	if u, err := url.PathUnescape(p); err == nil {
		p = u
	}
	if a, err := url.PathUnescape(anchor); err == nil {
		anchor = a
	}
	file := from
	if p != "" {
		if strings.HasPrefix(p, "/") {
			file = filepath.Join(c.root, filepath.FromSlash(p))
		} else {
			file = filepath.Join(filepath.Dir(from), filepath.FromSlash(p))
		}
		if _, err := os.Stat(file); err != nil {
			return "no file " + c.rel(file)
		}
	}
	return c.checkAnchor(file, anchor)
}

// checkAnchor says what is missing when anchor is not a heading's anchor in
// the Markdown file at file ("" when it is, or when there is no anchor or
// the file is not Markdown).
func (c *checker) checkAnchor(file, anchor string) string {
	if anchor == "" || !strings.HasSuffix(file, ".md") {
		return ""
	}
	if fi, err := os.Stat(file); err != nil || fi.IsDir() {
		return ""
	}
	d, err := c.doc(file)
	if err != nil {
		return "cannot read " + c.rel(file)
	}
	if !d.anchors[anchor] {
		return fmt.Sprintf("no heading with anchor #%s in %s", anchor, c.rel(file))
	}
	return ""
}

var (
	// docsMention is the path of a Markdown file under docs with an
	// optional #anchor, and then an optional comma and quoted heading.
	docsMention = regexp.MustCompile(`(?:^|[^\w./-])(docs/[\w./-]*?\.md)(#[\w-]*)?(?:,\s*"([^"]*)")?`)
)

func (c *checker) checkGo(path string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for _, g := range goComments(src) {
		for _, m := range docsMention.FindAllStringSubmatchIndex(g.text, -1) {
			line := g.lineAt(m[2])
			doc := g.text[m[2]:m[3]]
			file := filepath.Join(c.root, filepath.FromSlash(doc))
			cite := g.text[m[2]:m[1]]
			if fi, err := os.Stat(file); err != nil || fi.IsDir() {
				c.report(path, line, "%s: no file %s", cite, doc)
				continue
			}
			if m[4] >= 0 {
				if what := c.checkAnchor(file, g.text[m[4]+1:m[5]]); what != "" {
					c.report(path, line, "%s: %s", cite, what)
				}
			}
			if m[6] >= 0 {
				title := g.text[m[6]:m[7]]
				d, err := c.doc(file)
				if err != nil {
					return err
				}
				title = strings.Join(strings.Fields(title), " ")
				if !d.titles[foldTitle(title)] {
					c.report(path, line, "%s: no heading %q in %s", cite, title, doc)
				} else {
					c.report(path, line, "%s: cite it as %s#%s, the one form", cite, doc, Anchor(title))
				}
			}
		}
	}
	return nil
}

// A commentGroup is the text of adjacent comment lines joined by spaces,
// the comment markers removed, with where each line starts.
type commentGroup struct {
	text   string
	starts []int // offset in text of each line
	lines  []int // its line number in the file
}

func (g *commentGroup) add(line int, s string) {
	if g.text != "" {
		g.text += " "
	}
	g.starts = append(g.starts, len(g.text))
	g.lines = append(g.lines, line)
	g.text += s
}

// lineAt returns the file's line number of the text at offset off.
func (g *commentGroup) lineAt(off int) int {
	i := sort.SearchInts(g.starts, off+1) - 1
	return g.lines[i]
}

// goComments returns the comments of a Go source file, adjacent line
// comments joined into one group, as gofmt and go/ast group them.
func goComments(src []byte) []*commentGroup {
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments)
	var groups []*commentGroup
	var cur *commentGroup
	lastLine := -2
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok != token.COMMENT {
			cur, lastLine = nil, -2
			continue
		}
		line := file.Line(pos)
		if cur == nil || line != lastLine+1 {
			cur = &commentGroup{}
			groups = append(groups, cur)
		}
		if rest, ok := strings.CutPrefix(lit, "//"); ok {
			cur.add(line, strings.TrimSpace(rest))
			lastLine = line
			continue
		}
		body := strings.TrimSuffix(strings.TrimPrefix(lit, "/*"), "*/")
		for i, l := range strings.Split(body, "\n") {
			l = strings.TrimSpace(l)
			l = strings.TrimSpace(strings.TrimPrefix(l, "*"))
			cur.add(line+i, l)
		}
		lastLine = line + strings.Count(lit, "\n")
	}
	return groups
}
