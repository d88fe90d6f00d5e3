package conformance

import (
	"bufio"
	"io"
	"os"
	"testing"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readLine(r io.Reader) (string, error) {
	return bufio.NewReader(r).ReadString('\n')
}
