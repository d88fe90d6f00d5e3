package conformance

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strconv"
)

// A parallel run is two ginkgo runs (phases), each writing a junit report
// that lists every spec of the suite: run in one phase, skipped in the other.
// mergeJUnit makes the one junit_01.xml Sonobuoy's layout has, every spec
// once with the status of the phase that ran it.

// rawSuites, rawSuite and rawCase keep every attribute and child of ginkgo's
// report, so merging loses nothing of what a phase wrote.
type rawSuites struct {
	XMLName xml.Name   `xml:"testsuites"`
	Attrs   []xml.Attr `xml:",any,attr"`
	Suites  []rawSuite `xml:"testsuite"`
}

type rawSuite struct {
	XMLName    xml.Name   `xml:"testsuite"`
	Attrs      []xml.Attr `xml:",any,attr"`
	Properties *rawInner  `xml:"properties"`
	Cases      []rawCase  `xml:"testcase"`
}

type rawInner struct {
	Inner []byte `xml:",innerxml"`
}

type rawCase struct {
	XMLName xml.Name   `xml:"testcase"`
	Attrs   []xml.Attr `xml:",any,attr"`
	Inner   []byte     `xml:",innerxml"`
}

// statusOf is the Sonobuoy status of a raw case, the way ParseJUnit reads it.
func (c rawCase) statusOf() (string, error) {
	var jc junitCase
	data, err := xml.Marshal(c)
	if err != nil {
		return "", err
	}
	if err := xml.Unmarshal(data, &jc); err != nil {
		return "", err
	}
	return caseItem(jc).Status, nil
}

func (c rawCase) attr(name string) string { return attrOf(c.Attrs, name) }

// statusRank orders what a merged spec keeps: a failure anywhere stays a
// failure, a spec run in some phase is not reported skipped.
var statusRank = map[string]int{StatusSkipped: 0, StatusPassed: 1, StatusFailed: 2}

// mergeJUnit merges the phases' junit reports into one.
func mergeJUnit(reports [][]byte) ([]byte, error) {
	if len(reports) == 1 {
		return reports[0], nil
	}
	var first *rawSuite
	var order []string
	cases := map[string]rawCase{}
	statuses := map[string]string{}
	var totalTime float64
	for i, report := range reports {
		var doc rawSuites
		if err := xml.Unmarshal(report, &doc); err != nil {
			return nil, fmt.Errorf("reading the junit report of phase %d: %w", i+1, err)
		}
		for si := range doc.Suites {
			s := doc.Suites[si]
			if first == nil {
				first = &s
			}
			t, _ := strconv.ParseFloat(attrOf(s.Attrs, "time"), 64)
			totalTime += t
			for _, c := range s.Cases {
				st, err := c.statusOf()
				if err != nil {
					return nil, fmt.Errorf("reading test case %q of phase %d: %w", c.attr("name"), i+1, err)
				}
				name := c.attr("name")
				prev, seen := statuses[name]
				if !seen {
					order = append(order, name)
				}
				if !seen || statusRank[st] > statusRank[prev] {
					cases[name], statuses[name] = c, st
				}
			}
		}
	}
	if first == nil {
		return nil, fmt.Errorf("the junit reports hold no test suite")
	}
	merged := rawSuite{Properties: first.Properties}
	count := map[string]int{}
	for _, name := range order {
		merged.Cases = append(merged.Cases, cases[name])
		count[statuses[name]]++
	}
	timeStr := strconv.FormatFloat(totalTime, 'f', -1, 64)
	merged.Attrs = withAttrs(first.Attrs, map[string]string{
		"tests": strconv.Itoa(len(order)), "skipped": strconv.Itoa(count[StatusSkipped]),
		"failures": strconv.Itoa(count[StatusFailed]), "errors": "0", "time": timeStr,
	})
	doc := rawSuites{Suites: []rawSuite{merged}, Attrs: []xml.Attr{
		{Name: xml.Name{Local: "tests"}, Value: strconv.Itoa(len(order))},
		{Name: xml.Name{Local: "disabled"}, Value: strconv.Itoa(count[StatusSkipped])},
		{Name: xml.Name{Local: "errors"}, Value: "0"},
		{Name: xml.Name{Local: "failures"}, Value: strconv.Itoa(count[StatusFailed])},
		{Name: xml.Name{Local: "time"}, Value: timeStr},
	}}
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	buf.WriteString("\n")
	return buf.Bytes(), nil
}

func attrOf(attrs []xml.Attr, name string) string {
	for _, a := range attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// withAttrs is attrs with the named values replaced (order kept).
func withAttrs(attrs []xml.Attr, set map[string]string) []xml.Attr {
	out := make([]xml.Attr, len(attrs))
	copy(out, attrs)
	for i, a := range out {
		if v, ok := set[a.Name.Local]; ok {
			out[i].Value = v
		}
	}
	return out
}
