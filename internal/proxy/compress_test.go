package proxy

import (
	"testing"

	"github.com/helios-lb/helios/internal/compress"
	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/route"
	"github.com/helios-lb/helios/internal/wire"
)

// compressingPipeline is pipelineFor with the route compressing as the
// default policy does, and a static route (/static/) with the same
// policy planned by files.
func compressingPipeline(t *testing.T, files wire.Files) (*Pipeline, *compress.Policy) {
	t.Helper()
	pol, err := compress.NewPolicy(compress.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, up := pipelineFor(t, &fakeTransport{}, defaultPolicy(), nil)
	tab, err := route.New([]route.Entry[*Route]{
		{Name: "static", PathPrefix: "/static/", Value: &Route{Name: "static", Files: files, Compress: pol}},
		{Name: "app", Value: &Route{Name: "app", Upstream: up, Compress: pol}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.Swap(&Graph{Routes: tab, Upstreams: []*Upstream{up}})
	return p, pol
}

// jsonAnswer returns a backend's answer head: JSON of n bytes.
func jsonAnswer(n int64) *httpmsg.Response {
	r := &httpmsg.Response{Status: 200, ContentLength: n}
	r.Header.Add([]byte("Content-Type"), []byte("application/json"))
	r.Header.Add([]byte("Content-Length"), []byte("4096"))
	r.Header.Add([]byte("ETag"), []byte(`"v1"`))
	return r
}

// TestForwardedAnswersAreCompressed: the route's policy reads the
// backend's answer in Forwarded and hands the engine an encoder, the
// head marked for it; a client that accepts no coding gets the answer
// as it is, but for Vary.
func TestForwardedAnswersAreCompressed(t *testing.T) {
	p, pol := compressingPipeline(t, nil)
	tests := []struct {
		name     string
		ae       string
		want     compress.Coding
		wantHead string
	}{
		{name: "gzip", ae: "gzip", want: compress.Gzip, wantHead: "Content-Type: application/json\r\nETag: W/\"v1\"\r\nVary: Accept-Encoding\r\nContent-Encoding: gzip\r\n"},
		{name: "none accepted", want: compress.Identity, wantHead: "Content-Type: application/json\r\nContent-Length: 4096\r\nETag: \"v1\"\r\nVary: Accept-Encoding\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := &fakeExchange{method: "GET", resp: jsonAnswer(4096)}
			ex.begin()
			ex.req.Method, ex.req.Proto = []byte("GET"), httpmsg.HTTP11
			if tt.ae != "" {
				ex.req.Header.Add([]byte("Accept-Encoding"), []byte(tt.ae))
			}
			serve(p.NewFlow(), okTransport{}, ex)
			if got := takeCoding(ex); got != tt.want {
				t.Errorf("got coding %v, want %v", got, tt.want)
			}
			if h := headString(&ex.resp.Header); h != tt.wantHead {
				t.Errorf("got head\n%s\nwant\n%s", h, tt.wantHead)
			}
		})
	}
	if n := pol.Pool().InUse(); n != 0 {
		t.Errorf("got %d encoders in use, want 0", n)
	}
}

// takeCoding returns the coding of the encoder the pipeline handed ex
// (Identity: none), and releases it.
func takeCoding(ex *fakeExchange) compress.Coding {
	e, ok := ex.xf.(*compress.Encoder)
	if !ok {
		return compress.Identity
	}
	e.Release()
	return e.Coding()
}

// headString renders the fields of h that are not dropped.
func headString(h *httpmsg.Header) string {
	var s string
	for _, f := range h.Fields {
		if !f.Drop {
			s += string(f.Name) + ": " + string(f.Value) + "\r\n"
		}
	}
	return s
}

// TestCompressionNotAppliedAllocatesNothing: a route that compresses
// costs nothing per request when the answer is not compressed (too
// small, or of a type not listed).
func TestCompressionNotAppliedAllocatesNothing(t *testing.T) {
	p, _ := compressingPipeline(t, nil)
	small, png := jsonAnswer(100), jsonAnswer(1<<20)
	png.Header.Fields[0].Value = []byte("image/png")
	for _, resp := range []*httpmsg.Response{small, png} {
		ex := &fakeExchange{method: "GET", resp: resp}
		ex.req.Method, ex.req.Proto = []byte("GET"), httpmsg.HTTP11
		ex.req.Header.Add([]byte("Accept-Encoding"), []byte("gzip, br"))
		f := p.NewFlow()
		allocs := testing.AllocsPerRun(1000, func() { serve(f, okTransport{}, ex) })
		if allocs != 0 || ex.xf != nil {
			t.Errorf("got %v allocations and transform %v, want 0 and none", allocs, ex.xf)
		}
	}
}

// fakeFiles plans every answer as the fields and file given.
type fakeFiles struct {
	status int
	fields []string
	file   wire.AnswerFile
	length int64
	body   []byte
}

func (ff *fakeFiles) PlanFile(_ int, _ wire.Exchange, a *wire.FileAnswer) {
	a.Status = ff.status
	a.Header.Reset()
	for i := 0; i < len(ff.fields); i += 2 {
		a.Header.Add([]byte(ff.fields[i]), []byte(ff.fields[i+1]))
	}
	a.File, a.Length, a.Body = ff.file, ff.length, ff.body
}

type fakeFile struct{}

func (fakeFile) Fd() int                           { return -1 }
func (fakeFile) ReadAt([]byte, int64) (int, error) { return 0, nil }
func (fakeFile) Bytes() []byte                     { return nil }
func (fakeFile) Release()                          {}

// TestFileAnswersAreCompressed: a route's files go by its policy too,
// planned through the flow; HEAD gets the Vary of the GET it stands
// for, and the planner's own short texts go as they are.
func TestFileAnswersAreCompressed(t *testing.T) {
	css := []string{"Content-Type", "text/css", "Content-Length", "5000", "ETag", `"f-1"`}
	tests := []struct {
		name     string
		method   string
		ff       fakeFiles
		want     compress.Coding
		wantHead string
	}{
		{name: "file", method: "GET", ff: fakeFiles{status: 200, fields: css, file: fakeFile{}, length: 5000},
			want: compress.Gzip, wantHead: "Content-Type: text/css\r\nETag: W/\"f-1\"\r\nVary: Accept-Encoding\r\nContent-Encoding: gzip\r\n"},
		{name: "HEAD", method: "HEAD", ff: fakeFiles{status: 200, fields: css},
			want: compress.Identity, wantHead: "Content-Type: text/css\r\nContent-Length: 5000\r\nETag: \"f-1\"\r\nVary: Accept-Encoding\r\n"},
		{name: "error text", method: "GET", ff: fakeFiles{status: 404, fields: []string{"Content-Type", "text/plain", "Content-Length", "2000"}, body: make([]byte, 2000)},
			want: compress.Identity, wantHead: "Content-Type: text/plain\r\nContent-Length: 2000\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := compressingPipeline(t, &tt.ff)
			ex := &fakeExchange{method: tt.method, path: []byte("/static/a.css")}
			ex.req.Method, ex.req.Proto = []byte(tt.method), httpmsg.HTTP2
			ex.req.Header.Add([]byte("Accept-Encoding"), []byte("br, gzip"))
			f := p.NewFlow()
			if act := f.Begin(ex); act != wire.ActServeFile {
				t.Fatalf("got action %d, want ActServeFile", act)
			}
			var a wire.FileAnswer
			f.Files().PlanFile(0, ex, &a)
			if got := takeCoding(ex); got != tt.want {
				t.Errorf("got coding %v, want %v", got, tt.want)
			}
			if h := headString(&a.Header); h != tt.wantHead {
				t.Errorf("got head\n%s\nwant\n%s", h, tt.wantHead)
			}
			f.Sent(a.Status, 0, nil)
			f.Finish()
		})
	}
}
