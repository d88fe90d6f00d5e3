// Package docscheck checks the project's Markdown: relative links and
// their anchors resolve, and reference pages (the README and docs/*.md)
// carry no dates outside link targets, since what they say is true now
// and dated runs live in records under docs/.
package docscheck

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Problem is one thing wrong on a page.
type Problem struct {
	Where string // file:line
	What  string
}

func (p Problem) String() string { return p.Where + ": " + p.What }

// link is a Markdown link's target: [text](target "title").
var link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// date is a calendar date as records name themselves.
var date = regexp.MustCompile(`\b20\d\d-[01]\d-[0-3]\d\b`)

// codeSpan is inline code, where a link-like text is not a link.
var codeSpan = regexp.MustCompile("`[^`]*`")

// Page is a Markdown file read line by line, fenced blocks left out.
type Page struct {
	Path  string
	Lines []string // outside fenced code blocks; "" for lines inside
}

// Read reads the page at path.
func Read(path string) (*Page, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p := &Page{Path: path}
	fenced := false
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		text := s.Text()
		if strings.HasPrefix(strings.TrimSpace(text), "```") {
			fenced = !fenced
			p.Lines = append(p.Lines, "")
			continue
		}
		if fenced {
			text = ""
		}
		p.Lines = append(p.Lines, text)
	}
	return p, s.Err()
}

// Anchors are the fragment names of the page's headings, as GitHub makes
// them: lower case, punctuation dropped, spaces as hyphens, a repeated
// heading numbered.
func (p *Page) Anchors() map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range p.Lines {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := Slug(heading)
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// Slug is GitHub's anchor for a heading.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Links checks that every relative link of the page names a file that
// exists and, into a Markdown page, a heading it has.
func (p *Page) Links(anchorsOf func(path string) (map[string]bool, error)) []Problem {
	var problems []Problem
	for i, line := range p.Lines {
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range link.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, fragment, _ := strings.Cut(target, "#")
			path := p.Path
			if file != "" {
				path = filepath.Join(filepath.Dir(p.Path), file)
			}
			where := fmt.Sprintf("%s:%d", p.Path, i+1)
			if _, err := os.Stat(path); err != nil {
				problems = append(problems, Problem{where, fmt.Sprintf("link %s: no such file", target)})
				continue
			}
			if fragment == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			anchors, err := anchorsOf(path)
			if err != nil {
				problems = append(problems, Problem{where, err.Error()})
			} else if !anchors[fragment] {
				problems = append(problems, Problem{where, fmt.Sprintf("link %s: %s has no heading #%s", target, filepath.Base(path), fragment)})
			}
		}
	}
	return problems
}

// Dates returns the dates the page has outside link targets.
func (p *Page) Dates() []Problem {
	var problems []Problem
	for i, line := range p.Lines {
		for _, d := range date.FindAllString(link.ReplaceAllString(line, "]()"), -1) {
			problems = append(problems, Problem{fmt.Sprintf("%s:%d", p.Path, i+1), "a date (" + d + ") on a reference page: say what is true now, and link the dated record"})
		}
	}
	return problems
}
