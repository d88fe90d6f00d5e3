package series

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// ReadmeTableHeader starts README.md's table of the series: one row per
// patch, "| N | name | in one line |", in the series' order.
const ReadmeTableHeader = "| # | patch | in one line |"

// CheckReadmeTable checks README.md's patch table against the series: one
// row per patch, numbered in order, whose name is the patch file's name
// without its number and extension (case and dashes aside). Each problem
// names the row to fix.
func CheckReadmeTable(readme []byte, patches []Patch) []error {
	rows, err := readmeRows(readme)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for i, p := range patches {
		want := patchTitle(p.Name)
		if i >= len(rows) {
			errs = append(errs, fmt.Errorf("README.md's patch table has no row %d for %s: add \"| %d | %s | ... |\"", i+1, p.Name, i+1, want))
			continue
		}
		r := rows[i]
		if r.number != i+1 || normalTitle(r.name) != normalTitle(want) {
			errs = append(errs, fmt.Errorf("README.md's patch table row %d is \"%d | %s\", want \"%d | %s\" (%s)", i+1, r.number, r.name, i+1, want, p.Name))
		}
	}
	for _, r := range rows[min(len(rows), len(patches)):] {
		errs = append(errs, fmt.Errorf("README.md's patch table row %d (%s) names no patch of patches/series", r.number, r.name))
	}
	return errs
}

type readmeRow struct {
	number int
	name   string
}

func readmeRows(readme []byte) ([]readmeRow, error) {
	sc := bufio.NewScanner(bytes.NewReader(readme))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == ReadmeTableHeader {
			break
		}
	}
	if !sc.Scan() { // the |---| line
		return nil, fmt.Errorf("README.md has no patch table (a line %q)", ReadmeTableHeader)
	}
	var rows []readmeRow
	for sc.Scan() {
		cells := strings.Split(strings.TrimSpace(sc.Text()), "|")
		if len(cells) < 4 {
			break
		}
		n, err := strconv.Atoi(strings.TrimSpace(cells[1]))
		if err != nil {
			return nil, fmt.Errorf("README.md's patch table: %q does not start with a patch number", sc.Text())
		}
		rows = append(rows, readmeRow{number: n, name: strings.TrimSpace(cells[2])})
	}
	return rows, nil
}

// patchTitle is a patch file's name without its number and extension,
// dashes as spaces: 0001-watch-cache-hashmap-store.patch is "watch cache
// hashmap store".
func patchTitle(file string) string {
	stem := strings.TrimSuffix(file, ".patch")
	if _, rest, ok := strings.Cut(stem, "-"); ok {
		stem = rest
	}
	return strings.ReplaceAll(stem, "-", " ")
}

func normalTitle(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", " ")) }
