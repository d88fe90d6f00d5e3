// Command busybox-sh is /bin/sh of k1m's busybox test image. It runs
// busybox's ash, as upstream's image does, unless the environment holds a
// variable whose name is not a shell identifier (a ConfigMap key such as
// data-1 passed with envFrom): Debian's busybox ash drops those before
// running a command, upstream's passes them through, and the conformance
// specs that run `sh -c env` expect them. bash passes them through, so it
// runs the command then. Everything else (ash's messages, which some specs
// compare word for word) stays busybox's.
package main

import (
	"fmt"
	"os"
	"syscall"
)

const (
	busybox = "/bin/busybox"
	bash    = "/bin/bash"
)

func main() {
	// argv[0] stays as called (/bin/sh or sh): busybox picks its applet
	// from it and ash names itself by it in messages.
	shell := busybox
	if hasNonIdentifierName(os.Environ()) {
		shell = bash
	}
	err := syscall.Exec(shell, os.Args, os.Environ())
	fmt.Fprintf(os.Stderr, "sh: running %s: %v\n", shell, err)
	os.Exit(127)
}

// hasNonIdentifierName reports whether some NAME=value entry has a NAME
// that is not [A-Za-z_][A-Za-z0-9_]*.
func hasNonIdentifierName(env []string) bool {
	for _, kv := range env {
		name := kv
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				name = kv[:i]
				break
			}
		}
		if !isIdentifier(name) {
			return true
		}
	}
	return false
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
