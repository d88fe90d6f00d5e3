// Package clock waits the way long operations here do: a pause that ends
// early, with the context's error, when the context is done.
package clock

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx is done (then returns ctx.Err()).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
