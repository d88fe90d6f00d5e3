package dnsload

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"
)

// fakeDNS answers on loopback: NOERROR to every query, except that it
// answers SERVFAIL to every third and drops every fifth it receives.
func fakeDNS(t *testing.T) netip.AddrPort {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 512)
		for n := 1; ; n++ {
			size, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			if n%5 == 0 {
				continue
			}
			msg := append([]byte(nil), buf[:size]...)
			msg[2] |= 0x80 // a response
			if n%3 == 0 {
				msg[3] = 2 // SERVFAIL
			}
			conn.WriteToUDPAddrPort(msg, from)
		}
	}()
	return conn.LocalAddr().(*net.UDPAddr).AddrPort()
}

func TestFloodCountsAnswersFailuresAndLosses(t *testing.T) {
	server := fakeDNS(t)
	r, err := Flood(context.Background(), server, []string{"a.example.", "b.example."}, 3000, 500*time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	// 1,500 sent over one socket, so the fake sees them in order: every
	// fifth dropped (300), of the rest the multiples of 3 not of 5 failed
	// (400), 800 answered.
	if r.Sent != 1500 || r.Answered != 800 || r.Failed != 400 || r.Lost() != 300 {
		t.Errorf("sent %d, answered %d, failed %d, lost %d; want 1500, 800, 400, 300", r.Sent, r.Answered, r.Failed, r.Lost())
	}
	if r.Latency.Count != 800 || r.Latency.P99 <= 0 || r.Latency.P99 > AnswerTimeout {
		t.Errorf("latency %+v: want 800 samples, p99 in (0, %v]", r.Latency, AnswerTimeout)
	}
}

func TestFloodRefusesANameItCannotSend(t *testing.T) {
	_, err := Flood(context.Background(), netip.MustParseAddrPort("[::1]:53"), []string{"relative"}, 1, time.Second, 1)
	if want := `query name "relative": want a fully qualified name ending in a dot`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}
