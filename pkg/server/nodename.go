package server

import (
	"errors"
	"fmt"

	"k1m.dev/k1m/pkg/config"
	"k1m.dev/k1m/pkg/datadir"
	"k1m.dev/k1m/pkg/nodename"
)

// serverClientCert is the client certificate of the server's own node, by
// which data from a build before DATA-DIR/node-name is known.
func serverClientCert(dataDir string) string {
	return config.NewAgentPaths(datadir.Server(dataDir).Agent(), "").KubeletClientCert
}

// checkNodeName refuses a server started on a data directory made for
// another node name (package nodename says why), naming both and the
// flag; given is --node-name as given ("" when the host name was taken).
// It writes nothing: nodename.Record does once the start passed its checks.
func checkNodeName(dataDir, given, name string) error {
	var m *nodename.Mismatch
	if err := nodename.Check(dataDir, serverClientCert(dataDir), name); !errors.As(err, &m) {
		return err
	}
	return nameFlagError(m, given)
}

// nameFlagError is the refusal of m in the words of the --node-name flag.
func nameFlagError(m *nodename.Mismatch, given string) error {
	flag := "--node-name " + m.Wanted
	if given == "" {
		flag = "--node-name (not given: the host name, " + m.Wanted + ")"
	}
	return fmt.Errorf("%s: the data directory %s was made for node %s: start it with --node-name %s, or give this node an empty --data-dir (and remove the old one: k1m kubectl delete node %s)",
		flag, m.DataDir, m.Recorded, m.Recorded, m.Recorded)
}
