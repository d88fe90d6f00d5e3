package localcluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Every import runs once, at most workers at a time; the first error is
// returned and stops imports not yet started.
func TestRunImportsBoundsAndStops(t *testing.T) {
	var imports []imageImport
	for i := range 6 {
		imports = append(imports, imageImport{archive: fmt.Sprintf("a%d.tar", i), sock: "s"})
	}
	var mu sync.Mutex
	running, most, done := 0, 0, map[string]bool{}
	err := runImports(context.Background(), imports, 2, func(ctx context.Context, im imageImport) error {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // lets the other worker overlap
		mu.Lock()
		running--
		done[im.archive] = true
		mu.Unlock()
		return nil
	})
	if err != nil || len(done) != 6 || most > 2 {
		t.Fatalf("runImports: %v; %d done, %d at once at most; want 6 done, at most 2 at once", err, len(done), most)
	}
	started := 0
	err = runImports(context.Background(), imports, 1, func(ctx context.Context, im imageImport) error {
		started++
		if im.archive == "a1.tar" {
			return errors.New("no space left")
		}
		return nil
	})
	if err == nil || err.Error() != "no space left" || started != 2 {
		t.Fatalf("runImports with a failure: %v after %d started; want the failure after 2", err, started)
	}
}
