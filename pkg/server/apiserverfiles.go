package server

import (
	"fmt"
	"os"
	"path/filepath"

	"k1m.dev/k1m/pkg/componentargs"
	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/fsutil"
	"k1m.dev/k1m/pkg/secretsenc"
	"k1m.dev/k1m/pkg/serverbundle"
)

// apiserverOptions are kube-apiserver settings beyond the certificates:
// files this server writes for it, and the operator's pass-through flags.
type apiserverOptions struct {
	encryptionConfig string // "" when Secrets were never encrypted
	audit            config.Audit
	extra            []componentargs.Arg
}

// SecretsKeyFile is where builds before key sets kept the one Secrets
// key: read as a set of that key (SecretsKeySetFile takes over once the
// set changes).
func SecretsKeyFile(dataDir string) string {
	return filepath.Join(TLSDir(dataDir), serverbundle.SecretsEncryptionKeyFile)
}

// defaultAuditPolicy records the metadata of every request (who did what
// to which object, never a body), once per request, except node Lease
// heartbeats (100,000 a second at a million nodes) and health probes.
const defaultAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  userGroups: ["system:nodes"]
  verbs: [get, update, patch]
  resources: [{group: coordination.k8s.io, resources: [leases]}]
  namespaces: [kube-node-lease]
- level: None
  nonResourceURLs: [/healthz*, /livez*, /readyz*]
- level: Metadata
`

// phaseAPIServerFiles writes the encryption and audit files.
func (s *Server) phaseAPIServerFiles(c *certs, keys secretsenc.KeySet) (apiserverOptions, error) {
	opts := apiserverOptions{audit: s.cfg.Audit}
	var err error
	if opts.encryptionConfig, err = s.secretsEncryption(keys); err != nil {
		return opts, err
	}
	if opts.audit.LogPath != "" && opts.audit.PolicyFile == "" {
		opts.audit.PolicyFile = s.dir().AuditPolicy()
		if err := fsutil.WriteFile(opts.audit.PolicyFile, []byte(defaultAuditPolicy), 0o600); err != nil {
			return opts, err
		}
	}
	if opts.audit.LogPath != "" {
		if err := os.MkdirAll(filepath.Dir(opts.audit.LogPath), 0o700); err != nil {
			return opts, fmt.Errorf("--audit-log-path: %w", err)
		}
	}
	return opts, nil
}

// checkSecretsKey is the preflight check of the keys an earlier start
// kept: a bad file stops the server before anything is written.
func (s *Server) checkSecretsKey() error {
	if _, err := secretsenc.LoadKeySet(SecretsKeySetFile(s.cfg.DataDir), SecretsKeyFile(s.cfg.DataDir)); err != nil {
		return fmt.Errorf("--secrets-encryption: %w", err)
	}
	return nil
}

// secretsEncryption writes kube-apiserver's EncryptionConfiguration when
// the server has keys (phaseSecretsKeys): with --secrets-encryption new
// Secrets are encrypted with the write key; without it (keys from an
// earlier run, or the cluster's adopted before this server encrypts) new
// ones are written in plaintext and every encrypted one stays readable.
func (s *Server) secretsEncryption(set secretsenc.KeySet) (string, error) {
	if set.Empty() {
		return "", nil
	}
	data, err := secretsenc.Config(set, s.cfg.SecretsEncryption)
	if err != nil {
		return "", err
	}
	path := s.dir().EncryptionConfig()
	if err := fsutil.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	keyPath := SecretsKeySetFile(s.cfg.DataDir)
	if _, err := os.Stat(keyPath); err != nil {
		keyPath = SecretsKeyFile(s.cfg.DataDir)
	}
	if s.cfg.SecretsEncryption {
		s.step("Secrets are encrypted at rest (aescbc, key %s of %s)", set.Write, keyPath)
	} else {
		s.step("--secrets-encryption is off: new Secrets are written in plaintext; those encrypted stay readable with the keys of %s", keyPath)
	}
	return path, nil
}
