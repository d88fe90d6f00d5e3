package dnsload

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"k1m.dev/k1m/bench/stats"
)

// AnswerTimeout is how long a query may wait for its answer; later ones
// count as lost, as a resolver would have retried by then.
const AnswerTimeout = time.Second

// Reading is one flood's count of queries and their latencies.
type Reading struct {
	Sent, Answered, Failed int64 // Failed: answered with an error rcode
	Latency                stats.Latency
}

// Lost is the queries not answered in AnswerTimeout.
func (r Reading) Lost() int64 { return r.Sent - r.Answered - r.Failed }

// socket is one client's UDP socket, with the send time of each
// outstanding query by id.
type socket struct {
	conn             *net.UDPConn
	next             uint16
	sent             [1 << 16]atomic.Int64 // unix nanoseconds, 0 when not outstanding
	samples          []time.Duration
	answered, failed int64
}

// Flood sends the queries in names, in turn, to server at rate a second
// for window over sockets sockets, then waits AnswerTimeout for the last
// answers.
func Flood(ctx context.Context, server netip.AddrPort, names []string, rate float64, window time.Duration, sockets int) (Reading, error) {
	queries := make([][]byte, len(names))
	for i, n := range names {
		q, err := Query(0, n)
		if err != nil {
			return Reading{}, err
		}
		queries[i] = q
	}
	socks := make([]*socket, sockets)
	for i := range socks {
		conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(server))
		if err != nil {
			return Reading{}, fmt.Errorf("a UDP socket to %v: %w", server, err)
		}
		defer conn.Close()
		socks[i] = &socket{conn: conn}
	}
	var wg sync.WaitGroup
	for _, s := range socks {
		wg.Add(1)
		go func() { defer wg.Done(); s.receive() }()
	}
	sent, err := pace(ctx, socks, queries, rate, window)
	time.Sleep(AnswerTimeout)
	for _, s := range socks {
		s.conn.SetReadDeadline(time.Now()) // ends receive
	}
	wg.Wait()
	r := Reading{Sent: sent}
	var all []time.Duration
	for _, s := range socks {
		r.Answered += s.answered
		r.Failed += s.failed
		all = append(all, s.samples...)
	}
	r.Latency = stats.Summarize(all)
	return r, err
}

// pace sends rate queries a second, spread over the sockets in turn,
// catching up each millisecond with what is due; it returns the queries
// sent.
func pace(ctx context.Context, socks []*socket, queries [][]byte, rate float64, window time.Duration) (int64, error) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	var sent int64
	for {
		select {
		case <-ctx.Done():
			return sent, ctx.Err()
		case now := <-tick.C:
			elapsed := min(now.Sub(start), window)
			for due := int64(rate * elapsed.Seconds()); sent < due; sent++ {
				if err := socks[sent%int64(len(socks))].send(queries[sent%int64(len(queries))]); err != nil {
					return sent, err
				}
			}
			if elapsed >= window {
				return sent, nil
			}
		}
	}
}

// send writes query under the socket's next id.
func (s *socket) send(query []byte) error {
	id := s.next
	s.next++
	msg := append([]byte(nil), query...)
	msg[0], msg[1] = byte(id>>8), byte(id)
	s.sent[id].Store(time.Now().UnixNano())
	if _, err := s.conn.Write(msg); errors.Is(err, net.ErrClosed) {
		return err
	}
	// Any other failure (a full socket buffer, a refusal) is a lost
	// query, as it would be for a resolver.
	return nil
}

// receive reads answers until the socket's read deadline, keeping the
// latency of those in time.
func (s *socket) receive() {
	buf := make([]byte, 4096)
	for {
		n, err := s.conn.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. ECONNREFUSED from an earlier query's ICMP
		}
		now := time.Now().UnixNano()
		a, err := ParseAnswer(buf[:n])
		if err != nil {
			continue
		}
		at := s.sent[a.ID].Swap(0)
		if at == 0 {
			continue // not outstanding: a duplicate
		}
		latency := time.Duration(now - at)
		switch {
		case latency > AnswerTimeout:
			// lost: counted as neither
		case a.Answered:
			s.answered++
			s.samples = append(s.samples, latency)
		default:
			s.failed++
		}
	}
}
