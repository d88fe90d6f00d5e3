package apimetrics

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// A request the component drops before answering is asked again; one it
// answers is not.
func TestGetRetriedAsksAgainAfterADroppedConnection(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		io.WriteString(w, "up 1\n")
	}))
	defer srv.Close()
	resp, err := getRetried(context.Background(), srv.Client(), srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "up 1\n" || calls.Load() != 2 {
		t.Errorf("body %q after %d requests, want %q after 2", body, calls.Load(), "up 1\n")
	}
}
