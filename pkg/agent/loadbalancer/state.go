package loadbalancer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"

	"k1m.dev/k1m/pkg/fsutil"
)

// state is the file that keeps the last list the cluster published.
type state struct {
	// Servers are host:port addresses of kube-apiserver.
	Servers []string `json:"servers"`
}

// readState returns the saved list; none (and no error) when the file
// does not exist.
func readState(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, a := range s.Servers {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("%s: server %q: %w", path, a, err)
		}
	}
	return s.Servers, nil
}

// writeState saves servers atomically: a crash leaves the old list or the
// new one, never a torn file.
func writeState(path string, servers []string) error {
	data, err := json.Marshal(state{Servers: servers})
	if err != nil {
		return err
	}
	return fsutil.WriteFile(path, append(data, '\n'), 0o644)
}
