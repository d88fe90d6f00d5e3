package dnsload

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// DNS record types and response codes the load uses (RFC 1035, RFC 3596).
const (
	typeAAAA   = 28
	classIN    = 1
	rcodeOK    = 0
	rcodeNXDom = 3
)

// Query is the wire form of a recursive AAAA query for name (a fully
// qualified name, e.g. "kubernetes.default.svc.cluster.local.") with id.
func Query(id uint16, name string) ([]byte, error) {
	if !strings.HasSuffix(name, ".") {
		return nil, fmt.Errorf("query name %q: want a fully qualified name ending in a dot", name)
	}
	msg := make([]byte, 12, 12+len(name)+5)
	binary.BigEndian.PutUint16(msg[0:], id)
	binary.BigEndian.PutUint16(msg[2:], 0x0100) // recursion desired
	binary.BigEndian.PutUint16(msg[4:], 1)      // one question
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		if len(label) == 0 || len(label) > 63 {
			return nil, fmt.Errorf("query name %q: label %q is not 1 to 63 bytes", name, label)
		}
		msg = append(msg, byte(len(label)))
		msg = append(msg, label...)
	}
	msg = append(msg, 0, 0, typeAAAA, 0, classIN)
	return msg, nil
}

// Answer is what the load reads from a response: its id and whether it
// is an answer (NOERROR or NXDOMAIN: both are what a pod's search path
// expects) rather than a failure (SERVFAIL, REFUSED...).
type Answer struct {
	ID       uint16
	Answered bool
	Rcode    int
}

var errShort = errors.New("a DNS response shorter than its 12-byte header")

// ParseAnswer reads a response's header.
func ParseAnswer(msg []byte) (Answer, error) {
	if len(msg) < 12 {
		return Answer{}, errShort
	}
	if msg[2]&0x80 == 0 {
		return Answer{}, fmt.Errorf("a DNS message that is not a response (flags %#04x)", binary.BigEndian.Uint16(msg[2:]))
	}
	rcode := int(msg[3] & 0x0f)
	return Answer{ID: binary.BigEndian.Uint16(msg[0:]), Rcode: rcode, Answered: rcode == rcodeOK || rcode == rcodeNXDom}, nil
}
