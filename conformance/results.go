package conformance

import (
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// junitSuites is the part of ginkgo's junit_01.xml that results need.
type junitSuites struct {
	Suites []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Cases []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Status    string        `xml:"status,attr"`
	Time      string        `xml:"time,attr"`
	Skipped   *junitMessage `xml:"skipped"`
	Failure   *junitMessage `xml:"failure"`
	Error     *junitMessage `xml:"error"`
	SystemOut string        `xml:"system-out"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// Item is a node of Sonobuoy's results tree (sonobuoy_results.yaml).
type Item struct {
	Name     string            `json:"name"`
	Status   string            `json:"status"`
	Metadata map[string]string `json:"meta,omitempty"`
	Details  map[string]any    `json:"details,omitempty"`
	Items    []Item            `json:"items,omitempty"`
}

// Sonobuoy's statuses.
const (
	StatusPassed  = "passed"
	StatusFailed  = "failed"
	StatusSkipped = "skipped"
)

// suiteNode matches ginkgo's suite-level nodes, which junit lists beside
// the specs ([SynchronizedBeforeSuite], [ReportAfterSuite] ..., ...).
var suiteNode = regexp.MustCompile(`^\[(Synchronized)?(Report)?(Before|After)Suite\]`)

// Results are the spec counts and failures of one junit file.
type Results struct {
	Passed, Failed, Skipped int
	Failures                []string
	Tree                    Item // the plugin's results tree, as Sonobuoy writes it
}

// ParseJUnit reads ginkgo's junit report into Sonobuoy's results tree for
// the e2e plugin (file is the report's path inside the plugin's folder).
func ParseJUnit(r io.Reader, file string) (Results, error) {
	var suites junitSuites
	if err := xml.NewDecoder(r).Decode(&suites); err != nil {
		return Results{}, fmt.Errorf("reading the junit report: %w", err)
	}
	var res Results
	fileItem := Item{Name: "junit_01.xml", Metadata: map[string]string{"file": file, "type": "file"}}
	for _, s := range suites.Suites {
		for _, c := range s.Cases {
			item := caseItem(c)
			fileItem.Items = append(fileItem.Items, item)
			if suiteNode.MatchString(c.Name) && item.Status != StatusFailed {
				continue // setup and reporting nodes count only when they fail
			}
			switch item.Status {
			case StatusPassed:
				res.Passed++
			case StatusFailed:
				res.Failed++
				res.Failures = append(res.Failures, c.Name)
			default:
				res.Skipped++
			}
		}
	}
	if len(fileItem.Items) == 0 {
		return res, fmt.Errorf("the junit report holds no test case: the suite did not run (see e2e.log)")
	}
	sort.Strings(res.Failures)
	fileItem.Status = res.status()
	res.Tree = Item{Name: "e2e", Status: fileItem.Status, Metadata: map[string]string{"type": "summary"}, Items: []Item{fileItem}}
	return res, nil
}

func caseItem(c junitCase) Item {
	item := Item{Name: c.Name, Status: StatusPassed}
	switch {
	case c.Failure != nil || c.Error != nil || c.Status == "failed" || c.Status == "panicked" || c.Status == "timedout" || c.Status == "interrupted" || c.Status == "aborted":
		item.Status = StatusFailed
		msg := c.Failure
		if msg == nil {
			msg = c.Error
		}
		item.Details = map[string]any{}
		if msg != nil {
			item.Details["failure"] = strings.TrimSpace(msg.Message)
			item.Details["messages"] = []string{strings.TrimSpace(msg.Text)}
		}
		if c.SystemOut != "" {
			item.Details["system-out"] = c.SystemOut
		}
	case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
		item.Status = StatusSkipped
	}
	return item
}

func (r Results) status() string {
	if r.Failed > 0 {
		return StatusFailed
	}
	return StatusPassed
}

// Summary is the human summary, in the shape of `sonobuoy results`.
func (r Results) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Plugin: e2e\nStatus: %s\nTotal: %d\nPassed: %d\nFailed: %d\nSkipped: %d\n",
		r.status(), r.Passed+r.Failed+r.Skipped, r.Passed, r.Failed, r.Skipped)
	if len(r.Failures) > 0 {
		b.WriteString("\nFailed tests:\n")
		for _, f := range r.Failures {
			fmt.Fprintf(&b, "  %s\n", f)
		}
	}
	return b.String()
}
