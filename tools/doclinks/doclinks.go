// Package doclinks checks the links of the project's Markdown files: every
// relative link must name a file or directory that exists, and every
// #anchor a heading of the file it points into, by GitHub's rules for
// heading anchors. It does not fetch absolute URLs, and it does not read
// links inside code (fenced or indented blocks, inline code spans), which
// GitHub does not render as links.
package doclinks

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Broken is one link that does not resolve.
type Broken struct {
	File   string // the Markdown file, as given to Check
	Line   int    // 1-based
	Target string // the link's target as written
	Reason string
}

func (b Broken) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", b.File, b.Line, b.Target, b.Reason)
}

var (
	// inlineLink is [text](target) and ![alt](target), with an optional title.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// refDefinition is a reference-style definition, [label]: target.
	refDefinition = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s+<?([^\s>]+)>?`)
	// atxHeading is a heading line, # to ######.
	atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	// htmlAnchor is an explicit anchor, <a name="x"> or an id attribute.
	htmlAnchor = regexp.MustCompile(`<[a-zA-Z][^>]*\s(?:name|id)="([^"]+)"`)
	// scheme starts an absolute URL (https:, mailto:, ...).
	scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	// lineAnchor is GitHub's anchor of a line in a non-Markdown file.
	lineAnchor = regexp.MustCompile(`^L[0-9]+(-L[0-9]+)?$`)
)

// Check reads each file (a path relative to root, with '/' separators) and
// returns every link in it that does not resolve, in file and line order.
// An error is returned only when a file given cannot be read.
func Check(root string, files []string) ([]Broken, error) {
	anchors := map[string]map[string]bool{} // by cleaned path relative to root
	var broken []Broken
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return nil, fmt.Errorf("doclinks: %w", err)
		}
		for _, l := range links(string(text)) {
			if reason := resolve(root, f, l.target, anchors); reason != "" {
				broken = append(broken, Broken{File: f, Line: l.line, Target: l.target, Reason: reason})
			}
		}
	}
	return broken, nil
}

// resolve says why target, written in file from, does not resolve, or ""
// when it does. Absolute URLs resolve without being fetched.
func resolve(root, from, target string, cache map[string]map[string]bool) string {
	if target == "" {
		return "empty link"
	}
	if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return ""
	}
	path, anchor, _ := strings.Cut(target, "#")
	path, err := url.PathUnescape(path)
	if err != nil {
		return "bad escape in the path"
	}
	rel := from
	if path != "" {
		if strings.HasPrefix(path, "/") {
			rel = strings.TrimPrefix(path, "/")
		} else {
			rel = filepath.ToSlash(filepath.Join(filepath.Dir(from), path))
		}
	}
	rel = filepath.ToSlash(filepath.Clean(rel))
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "points outside the repository"
	}
	info, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return "no such file"
	}
	if anchor == "" {
		return ""
	}
	if info.IsDir() {
		return "an anchor on a directory"
	}
	if !strings.HasSuffix(strings.ToLower(rel), ".md") {
		if lineAnchor.MatchString(anchor) {
			return ""
		}
		return "an anchor into a file that is not Markdown"
	}
	if cache[rel] == nil {
		text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return "cannot read the target"
		}
		cache[rel] = Anchors(string(text))
	}
	if a, err := url.PathUnescape(anchor); err != nil || !cache[rel][strings.ToLower(a)] {
		return fmt.Sprintf("no heading with anchor #%s in %s", anchor, rel)
	}
	return ""
}

type link struct {
	line   int
	target string
}

// links returns the targets of the links of a Markdown text that GitHub
// renders: not those in code blocks or code spans.
func links(text string) []link {
	var out []link
	forEachProse(text, func(n int, line string) {
		if m := refDefinition.FindStringSubmatch(line); m != nil {
			out = append(out, link{n, m[1]})
			return
		}
		for _, m := range inlineLink.FindAllStringSubmatch(stripCodeSpans(line), -1) {
			out = append(out, link{n, m[1]})
		}
	})
	return out
}

// Anchors returns the anchors GitHub gives a Markdown text: one per heading
// (Slug of its text; a repeated slug gets -1, -2, ... in order), and the
// explicit name and id attributes of HTML tags.
func Anchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	forEachProse(text, func(_ int, line string) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[strings.ToLower(m[1])] = true
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		slug := Slug(m[1])
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	})
	return anchors
}

// headingLink is a link or image inside a heading: GitHub slugs its text.
var headingLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// Slug is GitHub's anchor for a heading's text: the rendered text in lower
// case, every character that is not a letter, mark, number, connector
// punctuation ('_'), space or '-' dropped, and each space turned into '-'.
func Slug(heading string) string {
	heading = headingLink.ReplaceAllString(strings.TrimSpace(heading), "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r) || unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// forEachProse calls fn with each line (1-based number) of text that is
// not inside a fenced or an indented code block.
func forEachProse(text string, fn func(n int, line string)) {
	var fence string // the opening fence while inside a fenced block
	prevBlank, inIndented := true, false
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		switch {
		case fence != "":
			if indent < 4 && strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
		case indent < 4 && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
		case strings.TrimSpace(line) == "":
			// a blank line neither opens nor closes an indented block
		case (indent >= 4 || strings.HasPrefix(line, "\t")) && (prevBlank || inIndented):
			inIndented = true
		default:
			inIndented = false
			fn(i+1, line)
		}
		prevBlank = strings.TrimSpace(line) == ""
	}
}

// stripCodeSpans removes inline code spans (a run of backticks, the code,
// and a closing run of the same length) from a line.
func stripCodeSpans(line string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(line, '`')
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		b.WriteString(line[:i])
		n := len(line[i:]) - len(strings.TrimLeft(line[i:], "`"))
		run := line[i : i+n]
		rest := line[i+n:]
		end := closingRun(rest, n)
		if end < 0 { // an unmatched run is literal text
			b.WriteString(run)
			line = rest
			continue
		}
		line = rest[end+n:]
	}
}

// closingRun finds the first run of exactly n backticks in s.
func closingRun(s string, n int) int {
	for i := 0; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] == '`' {
			j++
		}
		if j-i == n {
			return i
		}
		i = j
	}
	return -1
}
