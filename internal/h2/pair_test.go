package h2

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// testClient is a client handler for tests: each stream's exchange
// (a clientExchange, its User) collects the response, gives window
// back at once, and writes the request body as windows allow.
type testClient struct{}

// clientExchange is one request sent by a test client and what came
// back.
type clientExchange struct {
	out      outbound // the request body and trailers
	status   int
	body     []byte
	trailers []Field
	err      error
	done     bool
	doneCh   chan struct{}
}

func (x *clientExchange) finish(err error) {
	if x.done {
		return
	}
	x.done, x.err = true, err
	if x.doneCh != nil {
		close(x.doneCh)
	}
}

func (h *testClient) OnResponse(s *Stream, r *ResponseHead, end bool) {
	x := s.User().(*clientExchange)
	if r.Status >= 200 {
		x.status = r.Status
	}
	if end {
		x.finish(nil)
	}
}

func (h *testClient) OnData(s *Stream, p []byte, end bool) {
	x := s.User().(*clientExchange)
	x.body = append(x.body, p...)
	s.Consumed(len(p))
	if end {
		x.finish(nil)
	}
}

func (h *testClient) OnTrailers(s *Stream, fields []Field) {
	x := s.User().(*clientExchange)
	x.trailers = append(x.trailers, cloneFields(fields)...)
	x.finish(nil)
}

func (h *testClient) OnWritable(s *Stream) { s.User().(*clientExchange).out.pump(s) }

func (h *testClient) OnReset(s *Stream, err error) { s.User().(*clientExchange).finish(err) }

// send opens a stream for h with body and trailers.
func send(c *Conn, h *RequestHead, body []byte, trailers []Field) (*clientExchange, error) {
	empty := len(body) == 0 && len(trailers) == 0
	s, err := c.OpenStream(h, empty)
	if err != nil {
		return nil, err
	}
	x := &clientExchange{out: outbound{pending: body, end: true, trailers: trailers, finished: empty}}
	s.SetUser(x)
	x.out.pump(s)
	return x, nil
}

// memPair connects a client Conn and a server Conn in memory; run
// moves bytes between them until neither has anything to say. With rnd
// set, bytes are fed in pieces of random size, as a socket might give
// them.
type memPair struct {
	cli, srv     *Conn
	toCli, toSrv bytes.Buffer
	inCli, inSrv []byte
	rnd          *rand.Rand
}

func newMemPair(t testing.TB, cliCfg, srvCfg Config, rnd *rand.Rand) *memPair {
	m := &memPair{rnd: rnd}
	m.cli = NewClientConn(&m.toSrv, &testClient{}, cliCfg)
	m.srv = NewServerConn(&m.toCli, newTestServer(), srvCfg)
	m.run(t)
	return m
}

func (m *memPair) run(t testing.TB) {
	t.Helper()
	for moved := true; moved; {
		moved = m.move(t, m.srv, &m.toSrv, &m.inSrv)
		moved = m.move(t, m.cli, &m.toCli, &m.inCli) || moved
	}
}

func (m *memPair) move(t testing.TB, c *Conn, from *bytes.Buffer, in *[]byte) bool {
	t.Helper()
	if from.Len() == 0 {
		return false
	}
	for from.Len() > 0 {
		k := from.Len()
		if m.rnd != nil {
			k = 1 + m.rnd.IntN(min(k, 40000))
		}
		*in = append(*in, from.Next(k)...)
		n, err := c.Feed(*in)
		if errors.Is(err, ErrClosed) {
			from.Reset()
			return true
		}
		if err != nil {
			t.Fatalf("feeding: %v", err)
		}
		*in = (*in)[:copy(*in, (*in)[n:])]
	}
	return true
}

// TestPairExchanges runs a client Conn against a server Conn: many
// streams, bodies both ways through small windows, trailers, more
// requests than the server allows at once, and input cut at random.
func TestPairExchanges(t *testing.T) {
	for _, seed := range []uint64{0, 1, 2} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			var rnd *rand.Rand
			if seed > 0 {
				rnd = rand.New(rand.NewPCG(seed, 7))
			}
			small := Config{StreamWindow: 65535, ConnWindow: 100000}
			srvCfg := small
			srvCfg.MaxConcurrentStreams = 8
			m := newMemPair(t, small, srvCfg, rnd)
			if got := m.cli.AvailableStreams(); got != 8 {
				t.Fatalf("got %d available streams, want the server's 8", got)
			}
			type job struct {
				path     string
				body     []byte
				trailers []Field
				want     []byte
				x        *clientExchange
			}
			var jobs []*job
			for i := 0; i < 60; i++ {
				j := &job{path: "/echo"}
				switch i % 4 {
				case 0:
					j.body = randomBytes((i+1)*3000, uint64(i))
					j.want = j.body
				case 1:
					j.path, j.want = fmt.Sprintf("/bytes/%d", i*5000), nil
				case 2:
					j.body = randomBytes(1000+i, uint64(i))
					j.trailers = fieldList("grpc-status", fmt.Sprint(i))
					j.want = j.body
				case 3:
					j.path, j.want = "/", helloBody
				}
				jobs = append(jobs, j)
			}
			next := 0
			for rounds := 0; ; rounds++ {
				for next < len(jobs) && m.cli.CanOpen() {
					j := jobs[next]
					x, err := send(m.cli, request("POST", j.path), j.body, j.trailers)
					if err != nil {
						t.Fatal(err)
					}
					j.x = x
					next++
				}
				m.run(t)
				if next == len(jobs) && m.cli.ActiveStreams() == 0 {
					break
				}
				if rounds > 1000 {
					t.Fatalf("no progress: %d of %d sent, %d active", next, len(jobs), m.cli.ActiveStreams())
				}
			}
			for i, j := range jobs {
				x := j.x
				want := j.want
				if want == nil {
					want = bytes.Repeat([]byte("0123456789abcdef"), i*5000/16+1)[:i*5000]
				}
				if !x.done || x.err != nil || x.status != 200 || !bytes.Equal(x.body, want) {
					t.Errorf("request %d (%s): got done %v, err %v, status %d, %d bytes; want 200 and %d bytes", i, j.path, x.done, x.err, x.status, len(x.body), len(want))
				}
				if len(j.trailers) > 0 && (len(x.trailers) != 1 || !sameField(x.trailers[0], j.trailers[0])) {
					t.Errorf("request %d: got trailers %v, want %v", i, x.trailers, j.trailers)
				}
			}
			if m.srv.ActiveStreams() != 0 {
				t.Errorf("got %d streams open on the server, want 0", m.srv.ActiveStreams())
			}
			// Graceful shutdown across the pair: the idle client is done
			// at the first GOAWAY (its driver would close the socket);
			// the server, without the PING's answer, after GoAwayGrace.
			m.srv.Shutdown()
			m.run(t)
			m.srv.Tick(time.Now().Add(DefaultGoAwayGrace + time.Second))
			if !m.srv.Done() || !m.cli.Done() || m.cli.CanOpen() {
				t.Errorf("got server done %v, client done %v, CanOpen %v after shutdown; want true, true, false", m.srv.Done(), m.cli.Done(), m.cli.CanOpen())
			}
		})
	}
}
