package cli

import (
	"strings"
	"testing"
	"time"
)

func TestParseRunProfileDefaultsAndOverrides(t *testing.T) {
	o, err := ParseRun([]string{"--profile", "full", "--duration", "7s", "--kwok-steps", "10,20", "--scenarios", "lease,kwok", "--results", "/tmp/x"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Rounds != Profiles["full"].Rounds || o.Lease.Leases != 10000 {
		t.Errorf("profile defaults not applied: rounds %d, leases %d", o.Rounds, o.Lease.Leases)
	}
	if o.Lease.Duration != 7*time.Second || o.Etcd.Duration != 7*time.Second {
		t.Errorf("--duration not applied to both floods: %v %v", o.Lease.Duration, o.Etcd.Duration)
	}
	if len(o.Kwok.Steps) != 2 || o.Kwok.Steps[1] != 20 || strings.Join(o.Scenarios, ",") != "lease,kwok" || o.Results != "/tmp/x" {
		t.Errorf("overrides not applied: %+v %v %s", o.Kwok.Steps, o.Scenarios, o.Results)
	}
}

func TestParseRunRejectsBadInputNamingTheFlag(t *testing.T) {
	cases := map[string][]string{
		"--profile":    {"--profile", "huge"},
		"--kwok-steps": {"--kwok-steps", "5000,1000"},
		"--scenarios":  {"--scenarios", "lease,nodes"},
		"--workers":    {"--leases", "10", "--workers", "20"},
		"--long-renew": {"--long-renew", "1500ms"},
		"--leases":     {"--leases", "-5"},
	}
	for flag, args := range cases {
		_, err := ParseRun(args)
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("ParseRun(%q) = %v; want an error naming %s", args, err, flag)
		}
	}
}
