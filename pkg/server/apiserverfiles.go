package server

import (
	"errors"
	"fmt"
	"k1m.dev/k1m/pkg/serverbundle"
	"os"
	"path/filepath"

	"k1m.dev/k1m/pkg/componentargs"
	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/fsutil"
	"k1m.dev/k1m/pkg/secretsenc"
)

// apiserverOptions are kube-apiserver settings beyond the certificates:
// files this server writes for it, and the operator's pass-through flags.
type apiserverOptions struct {
	encryptionConfig string // "" when Secrets were never encrypted
	audit            config.Audit
	extra            []componentargs.Arg
}

// SecretsKeyFile is where --secrets-encryption keeps its key.
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
func (s *Server) phaseAPIServerFiles(c *certs) (apiserverOptions, error) {
	opts := apiserverOptions{audit: s.cfg.Audit}
	var err error
	if opts.encryptionConfig, err = s.secretsEncryption(c.dir); err != nil {
		return opts, err
	}
	if opts.audit.LogPath != "" && opts.audit.PolicyFile == "" {
		opts.audit.PolicyFile = filepath.Join(s.cfg.DataDir, "audit-policy.yaml")
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

// secretsEncryption writes kube-apiserver's EncryptionConfiguration when
// --secrets-encryption is on, or when it was on before (the key exists):
// then Secrets it encrypted stay readable while new ones are written in
// plaintext.
// checkSecretsKey is the preflight check of a key an earlier start made:
// a bad one stops the server before anything is written.
func (s *Server) checkSecretsKey() error {
	if err := secretsenc.CheckKey(SecretsKeyFile(s.cfg.DataDir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--secrets-encryption: %w", err)
	}
	return nil
}

func (s *Server) secretsEncryption(tlsDir string) (string, error) {
	keyPath := SecretsKeyFile(s.cfg.DataDir)
	_, statErr := os.Stat(keyPath)
	if !s.cfg.SecretsEncryption && errors.Is(statErr, os.ErrNotExist) {
		return "", nil
	}
	key, err := secretsenc.LoadOrCreateKey(keyPath)
	if err != nil {
		return "", fmt.Errorf("--secrets-encryption: %w", err)
	}
	data, err := secretsenc.Config(key, s.cfg.SecretsEncryption)
	if err != nil {
		return "", err
	}
	path := filepath.Join(tlsDir, "encryption-config.yaml")
	if err := fsutil.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	if s.cfg.SecretsEncryption {
		s.step("Secrets are encrypted at rest (aescbc, key %s)", keyPath)
	} else {
		s.step("--secrets-encryption is off: new Secrets are written in plaintext; those encrypted before stay readable with %s", keyPath)
	}
	return path, nil
}
