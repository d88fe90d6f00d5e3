package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleepEndsWithTheContext(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("a whole sleep: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
		t.Errorf("a cancelled sleep: %v after %v", err, time.Since(start))
	}
}
