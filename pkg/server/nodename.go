package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k1m.dev/k1m/pkg/fsutil"
	"k1m.dev/k1m/pkg/pki"
)

// nodeNameFile records the node name a data directory was made for: its
// etcd members, its node's certificates and its Node all carry it.
func nodeNameFile(dataDir string) string { return filepath.Join(dataDir, "node-name") }

// checkNodeName refuses a server started on a data directory made for
// another node name (a server that changed its name would register a
// second Node, its kubelet unable to use the old one's credentials, and
// its etcd member would keep the old name), naming both. It writes
// nothing: recordNodeName does once the start passed its checks. A data
// directory from a build before the record names its node in the node's
// client certificate.
func checkNodeName(dataDir, name string) error {
	was, err := recordedNodeName(dataDir)
	if err != nil || was == "" || was == name {
		return err
	}
	return fmt.Errorf("--node-name %s: the data directory %s was made for node %s: start it with --node-name %s, or give this node an empty --data-dir (and remove the old one: k1m kubectl delete node %s)", name, dataDir, was, was, was)
}

// recordNodeName records the node name the data directory is for, once.
func recordNodeName(dataDir, name string) error {
	if _, err := os.Stat(nodeNameFile(dataDir)); err == nil {
		return nil
	}
	return fsutil.WriteFile(nodeNameFile(dataDir), []byte(name+"\n"), 0o600)
}

func recordedNodeName(dataDir string) (string, error) {
	data, err := os.ReadFile(nodeNameFile(dataDir))
	if err == nil {
		return strings.TrimSpace(string(data)), nil
	}
	if !os.IsNotExist(err) {
		return "", err
	}
	cert, err := pki.ReadCertFile(filepath.Join(dataDir, "agent", "kubelet-pki", "kubelet-client-current.pem"))
	if err != nil {
		return "", nil // never joined its node: nothing to keep to
	}
	return strings.TrimPrefix(cert.Subject.CommonName, "system:node:"), nil
}
