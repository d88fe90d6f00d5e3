// Package nodename records the node name a data directory (a server's or
// an agent's) was made for, and tells a start under another name: its
// etcd members, its node's certificates and its Node all carry the name,
// so a node that changed its name would register a second Node whose
// kubelet cannot use the old one's credentials.
package nodename

import (
	"fmt"
	"os"
	"strings"

	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/fsutil"
	"k1m.dev/k1m/pkg/pki"
)

// File is where a data directory records its node name.
func File(dataDir string) string { return datadir.Server(dataDir).NodeName() }

// Mismatch says a data directory was made for another node name.
type Mismatch struct {
	DataDir  string
	Recorded string // the name the data directory was made for
	Wanted   string // the name of this start
}

func (m *Mismatch) Error() string {
	return fmt.Sprintf("node name %s: the data directory %s was made for node %s", m.Wanted, m.DataDir, m.Recorded)
}

// Check returns a *Mismatch when the data directory was made for a name
// other than name; a directory that records none yet passes. It writes
// nothing (Record does, once the start passed its checks). Data from a
// build before the record names its node in the kubelet's client
// certificate clientCert, which Check reads then.
func Check(dataDir, clientCert, name string) error {
	was, err := Recorded(dataDir, clientCert)
	if err != nil || was == "" || was == name {
		return err
	}
	return &Mismatch{DataDir: dataDir, Recorded: was, Wanted: name}
}

// Record records the node name the data directory is for, once.
func Record(dataDir, name string) error {
	if _, err := os.Stat(File(dataDir)); err == nil {
		return nil
	}
	return fsutil.WriteFile(File(dataDir), []byte(name+"\n"), 0o600)
}

// Recorded is the node name the data directory was made for: its record,
// else the name in the kubelet's client certificate clientCert, else ""
// (a node that never joined: nothing to keep to).
func Recorded(dataDir, clientCert string) (string, error) {
	data, err := os.ReadFile(File(dataDir))
	if err == nil {
		return strings.TrimSpace(string(data)), nil
	}
	if !os.IsNotExist(err) {
		return "", err
	}
	cert, err := pki.ReadCertFile(clientCert)
	if err != nil {
		return "", nil
	}
	return strings.TrimPrefix(cert.Subject.CommonName, "system:node:"), nil
}
