package constants

import "testing"

func TestEtcdServersOverrides(t *testing.T) {
	got := EtcdServersOverrides("https://[::1]:2381")
	want := "/events#https://[::1]:2381,coordination.k8s.io/leases#https://[::1]:2381"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
