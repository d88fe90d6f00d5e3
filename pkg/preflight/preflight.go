// Package preflight checks, before anything is written or started, that
// the directories and ports a k1m server or agent needs are usable; each
// error names the flag to change.
package preflight

import (
	"fmt"
	"net"
	"os"
	"strconv"
)

// Writable creates dir if needed and checks that files can be written in it.
func Writable(flag, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%s %s: cannot create it (%v): pick a directory k1m can write", flag, dir, err)
	}
	f, err := os.CreateTemp(dir, ".k1m-write-check-")
	if err != nil {
		return fmt.Errorf("%s %s: not writable (%v): pick a directory k1m can write", flag, dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// PortFree fails when host:port cannot be listened on, naming the flag.
func PortFree(flag, host string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("%s %d: port in use or not available on [%s] (%v): stop what holds it or pick another port", flag, port, host, err)
	}
	return l.Close()
}
