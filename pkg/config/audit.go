package config

import (
	"errors"
	"fmt"

	"k8s.io/apiserver/pkg/audit/policy"
)

// validate checks the audit settings before anything starts: a policy
// kube-apiserver would refuse stops the server here, naming the flag.
func (a Audit) validate() error {
	var errs []error
	if a.PolicyFile != "" {
		if a.LogPath == "" {
			errs = append(errs, fmt.Errorf("--audit-policy-file %s without --audit-log-path: give the file the audit log goes to", a.PolicyFile))
		}
		if _, err := policy.LoadPolicyFromFile(a.PolicyFile); err != nil {
			errs = append(errs, fmt.Errorf("--audit-policy-file: %v; want an audit.k8s.io/v1 Policy", err))
		}
	}
	for _, n := range []struct {
		flag  string
		value int
	}{{"--audit-log-maxage", a.MaxAge}, {"--audit-log-maxbackup", a.MaxBackup}, {"--audit-log-maxsize", a.MaxSize}} {
		if n.value < 0 {
			errs = append(errs, fmt.Errorf("%s %d: want 0 or more (0: no limit)", n.flag, n.value))
		}
	}
	return errors.Join(errs...)
}
