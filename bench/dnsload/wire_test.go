package dnsload

import (
	"bytes"
	"fmt"
	"testing"
)

func TestQueryIsTheWireFormOfAnAAAAQuestion(t *testing.T) {
	got, err := Query(0x1234, "kubernetes.default.svc.")
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0,
		10, 'k', 'u', 'b', 'e', 'r', 'n', 'e', 't', 'e', 's', 7, 'd', 'e', 'f', 'a', 'u', 'l', 't', 3, 's', 'v', 'c', 0,
		0, 28, 0, 1}
	if !bytes.Equal(got, want) {
		t.Errorf("Query =\n%v\nwant\n%v", got, want)
	}
}

func TestQueryRefusesNamesItCannotEncode(t *testing.T) {
	for name, want := range map[string]string{
		"kubernetes.default": `query name "kubernetes.default": want a fully qualified name ending in a dot`,
		"a..b.":              `query name "a..b.": label "" is not 1 to 63 bytes`,
		string(bytes.Repeat([]byte("x"), 64)) + ".": fmt.Sprintf("query name %q: label %q is not 1 to 63 bytes", string(bytes.Repeat([]byte("x"), 64))+".", string(bytes.Repeat([]byte("x"), 64))),
	} {
		if _, err := Query(1, name); fmt.Sprint(err) != want {
			t.Errorf("Query(%q) error = %v, want %s", name, err, want)
		}
	}
}

func TestParseAnswerTellsAnswersFromFailures(t *testing.T) {
	header := func(flags uint16) []byte {
		return []byte{0xab, 0xcd, byte(flags >> 8), byte(flags), 0, 1, 0, 1, 0, 0, 0, 0}
	}
	for _, c := range []struct {
		msg  []byte
		want Answer
	}{
		{header(0x8180), Answer{ID: 0xabcd, Answered: true, Rcode: 0}}, // NOERROR
		{header(0x8183), Answer{ID: 0xabcd, Answered: true, Rcode: 3}}, // NXDOMAIN
		{header(0x8182), Answer{ID: 0xabcd, Rcode: 2}},                 // SERVFAIL
	} {
		got, err := ParseAnswer(c.msg)
		if err != nil || got != c.want {
			t.Errorf("ParseAnswer(%x) = %+v, %v, want %+v", c.msg, got, err, c.want)
		}
	}
	if _, err := ParseAnswer(header(0x0100)); fmt.Sprint(err) != "a DNS message that is not a response (flags 0x0100)" {
		t.Errorf("a query: error %v", err)
	}
	if _, err := ParseAnswer([]byte{1, 2}); err != errShort {
		t.Errorf("2 bytes: error %v, want %v", err, errShort)
	}
}
