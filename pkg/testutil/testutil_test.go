package testutil

import (
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	ctx, cancel := Budget(t, time.Minute)
	defer cancel()
	deadline, ok := ctx.Deadline()
	if want := time.Now().Add(time.Minute); !ok || deadline.After(want) || deadline.Before(want.Add(-5*time.Second)) {
		t.Errorf("Budget(1m) ends at %v (%v), want about %v", deadline, ok, want)
	}
	testDeadline, bounded := t.Deadline()
	if !bounded {
		t.Skip("go test ran without -timeout: nothing bounds a long budget")
	}
	ctx, cancel = Budget(t, 1000*time.Hour)
	defer cancel()
	if deadline, _ := ctx.Deadline(); !deadline.Equal(testDeadline.Add(-TeardownMargin)) {
		t.Errorf("Budget(1000h) ends at %v, want %v (TeardownMargin before go test's deadline %v)", deadline, testDeadline.Add(-TeardownMargin), testDeadline)
	}
}
