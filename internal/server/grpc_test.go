package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// grpcConfig is Helios in front of one gRPC server ({{GRPC}}) spoken to
// over h2c; {{LISTENER}} is the rest of the listener "web": h2c with
// prior knowledge, or TLS offering h2 in ALPN.
const grpcConfig = `
listeners: [{name: web, address: "127.0.0.1:1", {{LISTENER}}}]
routes: [{name: grpc, match: {path_prefix: /}, upstream: grpc}]
upstreams:
  - name: grpc
    backends: [{address: "{{GRPC}}"}]
    transport: {protocol: h2c}
admin: {address: "off"}
`

// grpcMaxMsg is the largest message either side accepts: above the 4 MiB
// that the large-message case sends both ways (gRPC's default limit).
const grpcMaxMsg = 16 << 20

// TestGRPCThroughHelios calls the gRPC interop test service (grpc-go's
// own client and server) through Helios, the service behind an h2c
// upstream, once through a cleartext h2c listener and once through a TLS
// listener: every call shape, metadata and trailers, a status with
// details, deadlines, cancellation, a message larger than the flow
// control windows and many concurrent calls.
func TestGRPCThroughHelios(t *testing.T) {
	svc := &grpcService{waits: map[string]*grpcWait{}}
	backendAddr, accepted := startGRPCBackend(t, svc)
	certs := newTestCerts(t)
	certs.write(t, "site", "site.example")

	// "direct" calls the service without Helios: the control that shows
	// the cases themselves pass against grpc-go, so that a failure through
	// Helios is Helios's.
	setups := []struct {
		name     string
		direct   bool
		listener string
		creds    credentials.TransportCredentials
		tls      bool
	}{
		{name: "direct", direct: true, creds: insecure.NewCredentials()},
		{name: "h2c listener", listener: "h2c: true", creds: insecure.NewCredentials()},
		{name: "tls listener", tls: true,
			listener: `tls: {cert_file: "` + certs.dir + `/site.pem", key_file: "` + certs.dir + `/site.key"}`,
			creds:    credentials.NewTLS(&tls.Config{RootCAs: certs.pool, ServerName: "site.example"})},
	}
	for _, su := range setups {
		t.Run(su.name, func(t *testing.T) {
			target := backendAddr
			if !su.direct {
				yaml := strings.NewReplacer("{{LISTENER}}", su.listener, "{{GRPC}}", backendAddr).Replace(grpcConfig)
				s, _ := startServer(t, yamlConfig(t, yaml, nil), Options{})
				target = s.Addr("web").String()
			}
			cc, err := grpc.NewClient("passthrough:///"+target,
				grpc.WithTransportCredentials(su.creds),
				grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(grpcMaxMsg)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cc.Close() })
			e := &grpcEnv{c: testpb.NewTestServiceClient(cc), svc: svc, accepted: accepted, tls: su.tls}
			for _, tt := range grpcCases {
				t.Run(tt.name, func(t *testing.T) { tt.run(t, e) })
			}
		})
	}
}

// grpcEnv is what each case gets: a client through Helios, the service
// behind it, and how many connections the service has accepted.
type grpcEnv struct {
	c        testpb.TestServiceClient
	svc      *grpcService
	accepted *atomic.Int64
	tls      bool // the client reached Helios over TLS
}

// ctx bounds one case's calls.
func (e *grpcEnv) ctx(t *testing.T) context.Context {
	return e.ctxFor(t, 5*time.Second)
}

// ctxFor bounds a case's calls to d.
func (e *grpcEnv) ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var grpcCases = []struct {
	name string
	run  func(t *testing.T, e *grpcEnv)
}{
	{name: "unary with metadata", run: func(t *testing.T, e *grpcEnv) {
		ctx := metadata.AppendToOutgoingContext(e.ctx(t), "x-token", "secret-42")
		var header, trailer metadata.MD
		var p peer.Peer
		body := []byte("hello through helios")
		res, err := e.c.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: body}},
			grpc.Header(&header), grpc.Trailer(&trailer), grpc.Peer(&p))
		if err != nil {
			t.Fatalf("UnaryCall: got %v, want nil", err)
		}
		if got := res.GetPayload().GetBody(); !bytes.Equal(got, body) {
			t.Errorf("payload: got %q, want %q", got, body)
		}
		// The server put what it heard of the request's metadata in its
		// response header.
		if got := header.Get("x-echo-token"); len(got) != 1 || got[0] != "secret-42" {
			t.Errorf("header x-echo-token: got %q, want [secret-42]", got)
		}
		if got := trailer.Get("x-body-bytes"); len(got) != 1 || got[0] != strconv.Itoa(len(body)) {
			t.Errorf("trailer x-body-bytes: got %q, want [%d]", got, len(body))
		}
		if got := trailer.Get("x-raw-bin"); len(got) != 1 || got[0] != grpcRawBin {
			t.Errorf("trailer x-raw-bin: got %q, want [%q]", got, grpcRawBin)
		}
		if e.tls {
			ti, ok := p.AuthInfo.(credentials.TLSInfo)
			if !ok || ti.State.NegotiatedProtocol != "h2" {
				t.Errorf("peer auth info: got %#v, want TLS with ALPN h2", p.AuthInfo)
			}
		}
	}},
	{name: "server streaming", run: func(t *testing.T, e *grpcEnv) {
		sizes := []int32{1, 10, 100, 1000, 70000}
		req := &testpb.StreamingOutputCallRequest{}
		for _, n := range sizes {
			req.ResponseParameters = append(req.ResponseParameters, &testpb.ResponseParameters{Size: n})
		}
		stream, err := e.c.StreamingOutputCall(e.ctx(t), req)
		if err != nil {
			t.Fatalf("StreamingOutputCall: got %v, want nil", err)
		}
		for i, n := range sizes {
			res, err := stream.Recv()
			if err != nil {
				t.Fatalf("response %d: got %v, want a message", i, err)
			}
			if want := bytes.Repeat([]byte{byte('a' + i)}, int(n)); !bytes.Equal(res.GetPayload().GetBody(), want) {
				t.Errorf("response %d: got %d bytes starting %q, want %d bytes of %q", i,
					len(res.GetPayload().GetBody()), grpcPrefix(res.GetPayload().GetBody()), n, rune('a'+i))
			}
		}
		if res, err := stream.Recv(); err != io.EOF {
			t.Errorf("after %d responses: got %v, %v, want io.EOF", len(sizes), res, err)
		}
		if got := stream.Trailer().Get("x-sent"); len(got) != 1 || got[0] != strconv.Itoa(len(sizes)) {
			t.Errorf("trailer x-sent: got %q, want [%d]", got, len(sizes))
		}
	}},
	{name: "client streaming", run: func(t *testing.T, e *grpcEnv) {
		stream, err := e.c.StreamingInputCall(e.ctx(t))
		if err != nil {
			t.Fatalf("StreamingInputCall: got %v, want nil", err)
		}
		sizes := []int{27182, 8, 1828, 45904, 0, 100000}
		want := 0
		for _, n := range sizes {
			if err := stream.Send(&testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: make([]byte, n)}}); err != nil {
				t.Fatalf("Send: got %v, want nil", err)
			}
			want += n
		}
		res, err := stream.CloseAndRecv()
		if err != nil {
			t.Fatalf("CloseAndRecv: got %v, want nil", err)
		}
		if got := res.GetAggregatedPayloadSize(); int(got) != want {
			t.Errorf("aggregated size: got %d, want %d", got, want)
		}
	}},
	{name: "bidirectional ping-pong", run: func(t *testing.T, e *grpcEnv) {
		// Ten round trips take milliseconds; a stall shows within 3s.
		stream, err := e.c.FullDuplexCall(e.ctxFor(t, 3*time.Second))
		if err != nil {
			t.Fatalf("FullDuplexCall: got %v, want nil", err)
		}
		// Each answer must come back before the next request is sent: a
		// proxy that held the request stream until it ended would stall
		// here until the context's deadline.
		for i := 0; i < 10; i++ {
			ping := []byte(fmt.Sprintf("ping %d", i))
			if err := stream.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: ping}}); err != nil {
				t.Fatalf("Send %d: got %v, want nil", i, err)
			}
			res, err := stream.Recv()
			if err != nil {
				t.Fatalf("Recv %d: got %v, want the echo", i, err)
			}
			if got := res.GetPayload().GetBody(); !bytes.Equal(got, ping) {
				t.Errorf("echo %d: got %q, want %q", i, got, ping)
			}
		}
		if err := stream.CloseSend(); err != nil {
			t.Fatalf("CloseSend: got %v, want nil", err)
		}
		if res, err := stream.Recv(); err != io.EOF {
			t.Errorf("after CloseSend: got %v, %v, want io.EOF", res, err)
		}
	}},
	{name: "deadline exceeded", run: func(t *testing.T, e *grpcEnv) {
		w, ctx := e.svc.expect(e.ctx(t))
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := e.c.EmptyCall(ctx, &testpb.Empty{})
		if got := status.Code(err); got != codes.DeadlineExceeded {
			t.Errorf("EmptyCall: got %v (%v), want DeadlineExceeded", got, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("EmptyCall returned after %v, want about 300ms", d)
		}
		// The client sent grpc-timeout, so the server's own timer ends the
		// handler (DeadlineExceeded) even if the client's RST_STREAM, relayed
		// by Helios, does not get there first (Canceled). Either way within
		// a bound; "cancel" below is the case that needs the RST_STREAM.
		w.wait(t, 3*time.Second, context.DeadlineExceeded, context.Canceled)
	}},
	{name: "cancel", run: func(t *testing.T, e *grpcEnv) {
		w, ctx := e.svc.expect(e.ctx(t))
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			_, err := e.c.EmptyCall(ctx, &testpb.Empty{})
			errc <- err
		}()
		select {
		case <-w.started:
		case <-time.After(5 * time.Second):
			t.Fatal("the handler did not start within 5s")
		}
		before := e.accepted.Load()
		// No deadline travels with this call: the server's context ends
		// only when Helios resets (or closes) the stream to it.
		cancel()
		select {
		case err := <-errc:
			if got := status.Code(err); got != codes.Canceled {
				t.Errorf("EmptyCall: got %v (%v), want Canceled", got, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("EmptyCall did not return within 5s of the cancel")
		}
		w.wait(t, 2*time.Second, context.Canceled)
		// A stream reset, not a connection closed: the next call goes on the
		// connection Helios had.
		if _, err := e.c.UnaryCall(e.ctx(t), &testpb.SimpleRequest{}); err != nil {
			t.Fatalf("UnaryCall after the cancel: got %v, want nil", err)
		}
		if got := e.accepted.Load(); got != before {
			t.Errorf("connections the backend accepted: got %d after the cancel, want %d (the one stream reset)", got, before)
		}
	}},
	{name: "error status with details", run: func(t *testing.T, e *grpcEnv) {
		const msg = "size −1 refused: 100% wrong\nsecond line"
		detail := &testpb.Payload{Type: testpb.PayloadType_COMPRESSABLE, Body: []byte("the detail")}
		_, err := e.c.UnaryCall(e.ctx(t), &testpb.SimpleRequest{
			Payload:        detail,
			ResponseStatus: &testpb.EchoStatus{Code: int32(codes.InvalidArgument), Message: msg},
		})
		st, ok := status.FromError(err)
		if !ok {
			t.Fatalf("UnaryCall: got %v, want a status", err)
		}
		if st.Code() != codes.InvalidArgument || st.Message() != msg {
			t.Errorf("status: got %v %q, want InvalidArgument %q", st.Code(), st.Message(), msg)
		}
		details := st.Details()
		if len(details) != 1 {
			t.Fatalf("details: got %v, want one Payload", details)
		}
		got, ok := details[0].(*testpb.Payload)
		if !ok || got.GetType() != detail.GetType() || !bytes.Equal(got.GetBody(), detail.GetBody()) {
			t.Errorf("detail: got %v, want %v", details[0], detail)
		}
	}},
	{name: "4 MiB message", run: func(t *testing.T, e *grpcEnv) {
		body := make([]byte, 4<<20)
		rand.Read(body)
		res, err := e.c.UnaryCall(e.ctx(t), &testpb.SimpleRequest{Payload: &testpb.Payload{Body: body}})
		if err != nil {
			t.Fatalf("UnaryCall: got %v, want nil", err)
		}
		if got := res.GetPayload().GetBody(); !bytes.Equal(got, body) {
			t.Errorf("echo: got %d bytes (equal: false), want the %d sent", len(got), len(body))
		}
	}},
	{name: "200 concurrent calls", run: func(t *testing.T, e *grpcEnv) {
		ctx := e.ctx(t)
		const n = 200
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := []byte(fmt.Sprintf("call %d", i))
				res, err := e.c.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: body}})
				switch {
				case err != nil:
					errs <- fmt.Errorf("call %d: got %v, want nil", i, err)
				case !bytes.Equal(res.GetPayload().GetBody(), body):
					errs <- fmt.Errorf("call %d: got %q, want %q", i, res.GetPayload().GetBody(), body)
				}
			}()
		}
		wg.Wait()
		close(errs)
		failed := 0
		for err := range errs {
			if failed++; failed <= 5 {
				t.Error(err)
			}
		}
		if failed > 0 {
			t.Errorf("failed calls: got %d, want 0 of %d", failed, n)
		}
	}},
}

// grpcPrefix is the start of b, for messages.
func grpcPrefix(b []byte) []byte {
	return b[:min(len(b), 8)]
}

// grpcRawBin is a binary metadata value (sent base64-encoded under a
// -bin key).
const grpcRawBin = "\x00\x01helios\xff"

// startGRPCBackend serves svc with grpc-go on a loopback port (cleartext,
// so HTTP/2 with prior knowledge) and returns its address and a count of
// the connections it accepted.
func startGRPCBackend(t *testing.T, svc *grpcService) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &grpcCountingListener{Listener: ln}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(grpcMaxMsg))
	testpb.RegisterTestServiceServer(srv, svc)
	go srv.Serve(cl)
	t.Cleanup(srv.Stop)
	return ln.Addr().String(), &cl.accepted
}

// grpcCountingListener counts the connections it accepts.
type grpcCountingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *grpcCountingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// grpcService is the interop TestService: UnaryCall echoes (or fails
// with the status asked for, with the payload as its detail),
// StreamingOutputCall sends the sizes asked for, StreamingInputCall adds
// up, FullDuplexCall echoes each message, and EmptyCall waits for its
// context to end and reports how it ended.
type grpcService struct {
	testpb.UnimplementedTestServiceServer
	mu    sync.Mutex
	waits map[string]*grpcWait
}

// grpcWait is one EmptyCall: started when the handler runs, ended with
// its context's error (nil: it gave up waiting first).
type grpcWait struct {
	started chan struct{}
	ended   chan error
}

var grpcWaitID atomic.Int64

// expect registers an EmptyCall and returns it and ctx carrying its id.
func (s *grpcService) expect(ctx context.Context) (*grpcWait, context.Context) {
	id := strconv.FormatInt(grpcWaitID.Add(1), 10)
	w := &grpcWait{started: make(chan struct{}), ended: make(chan error, 1)}
	s.mu.Lock()
	s.waits[id] = w
	s.mu.Unlock()
	return w, metadata.AppendToOutgoingContext(ctx, "x-wait-id", id)
}

// wait checks that the handler's context ended, with one of want, within d.
func (w *grpcWait) wait(t *testing.T, d time.Duration, want ...error) {
	t.Helper()
	select {
	case err := <-w.ended:
		for _, ok := range want {
			if errors.Is(err, ok) {
				return
			}
		}
		t.Errorf("the handler's context ended with %v, want one of %v", err, want)
	case <-time.After(d):
		t.Errorf("the handler's context: not done within %v, want ended with one of %v", d, want)
	}
}

func (s *grpcService) EmptyCall(ctx context.Context, _ *testpb.Empty) (*testpb.Empty, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	ids := md.Get("x-wait-id")
	if len(ids) != 1 {
		return nil, status.Errorf(codes.InvalidArgument, "x-wait-id: got %q, want one", ids)
	}
	s.mu.Lock()
	w := s.waits[ids[0]]
	delete(s.waits, ids[0])
	s.mu.Unlock()
	if w == nil {
		return nil, status.Errorf(codes.NotFound, "no wait %s", ids[0])
	}
	close(w.started)
	select {
	case <-ctx.Done():
		w.ended <- ctx.Err()
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-time.After(5 * time.Second):
		w.ended <- nil
		return &testpb.Empty{}, nil
	}
}

func (s *grpcService) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if rs := req.GetResponseStatus(); rs != nil {
		st, err := status.New(codes.Code(rs.GetCode()), rs.GetMessage()).WithDetails(req.GetPayload())
		if err != nil {
			return nil, status.Errorf(codes.Internal, "adding details: %v", err)
		}
		return nil, st.Err()
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if err := grpc.SetHeader(ctx, metadata.Pairs("x-echo-token", strings.Join(md.Get("x-token"), ","))); err != nil {
		return nil, err
	}
	if err := grpc.SetTrailer(ctx, metadata.Pairs(
		"x-body-bytes", strconv.Itoa(len(req.GetPayload().GetBody())),
		"x-raw-bin", grpcRawBin)); err != nil {
		return nil, err
	}
	return &testpb.SimpleResponse{Payload: req.GetPayload()}, nil
}

func (s *grpcService) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
	for i, p := range req.GetResponseParameters() {
		body := bytes.Repeat([]byte{byte('a' + i)}, int(p.GetSize()))
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: body}}); err != nil {
			return err
		}
	}
	stream.SetTrailer(metadata.Pairs("x-sent", strconv.Itoa(len(req.GetResponseParameters()))))
	return nil
}

func (s *grpcService) StreamingInputCall(stream grpc.ClientStreamingServer[testpb.StreamingInputCallRequest, testpb.StreamingInputCallResponse]) error {
	var size int32
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: size})
		}
		if err != nil {
			return err
		}
		size += int32(len(req.GetPayload().GetBody()))
	}
}

func (s *grpcService) FullDuplexCall(stream grpc.BidiStreamingServer[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]) error {
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: req.GetPayload()}); err != nil {
			return err
		}
	}
}
