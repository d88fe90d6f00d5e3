package server

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// phaseTableIntro starts the paragraph of docs/server.md the table of the
// server's phases follows.
const phaseTableIntro = "Its phases, in order (`pkg/server`"

// docs/server.md's table of phases names Run's phases, in order.
func TestPhaseTable(t *testing.T) {
	data, err := os.ReadFile("../../docs/server.md")
	if err != nil {
		t.Fatal(err)
	}
	documented, err := phaseTable(string(data))
	if err != nil {
		t.Fatal(err)
	}
	if want := PhaseNames(); !slices.Equal(documented, want) {
		t.Errorf("docs/server.md's phase table lists %q, Run's phases are %q", documented, want)
	}
}

// phaseTable reads the first column of the table after phaseTableIntro.
func phaseTable(doc string) ([]string, error) {
	_, after, found := strings.Cut(doc, phaseTableIntro)
	if !found {
		return nil, errNoPhaseTable
	}
	var names []string
	row := 0
	for _, line := range strings.Split(after, "\n") {
		if !strings.HasPrefix(line, "|") {
			if row > 0 {
				break
			}
			continue // the rest of the paragraph, the blank line
		}
		if row++; row <= 2 { // the header and its rule
			continue
		}
		cells := strings.Split(line, "|")
		names = append(names, strings.TrimSpace(cells[1]))
	}
	return names, nil
}

var errNoPhaseTable = errors.New("docs/server.md has no line " + phaseTableIntro)

func TestPhaseTableReadsTheFirstColumn(t *testing.T) {
	doc := "x\n\n" + phaseTableIntro + ", more):\n\n| phase | what |\n|---|---|\n| resolve | a |\n| token file | b |\n\nmore\n| not | this |\n"
	got, err := phaseTable(doc)
	if want := []string{"resolve", "token file"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("phaseTable = %q, %v; want %q", got, err, want)
	}
	if _, err := phaseTable("no table"); err == nil {
		t.Error("phaseTable of a page without the table: no error")
	}
}
