package static

import (
	"io"
	"net/http"
	"strings"
)

// ServeHTTP answers r through Plan, copying the planned range with
// pread: for engines without sendfile, and to compare the planner with
// net/http in tests. It allocates; the event loop uses Plan.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := h.answers.Get().(*Answer)
	defer h.answers.Put(a)
	h.Plan(httpRequest{r}, a)
	if a.File != nil {
		defer a.File.Release()
	}
	hdr := w.Header()
	for _, f := range a.Header.Fields {
		hdr.Set(string(f.Name), string(f.Value))
	}
	w.WriteHeader(a.Status)
	if a.Body != nil {
		w.Write(a.Body)
	}
	if a.File != nil {
		// pread, never seek: the descriptor is shared with other
		// answers. The LimitedReader sizes io.Copy's buffer to small
		// files.
		io.Copy(w, &io.LimitedReader{R: io.NewSectionReader(a.File, a.Offset, a.Length), N: a.Length})
	}
}

// httpRequest is a Request over an *http.Request.
type httpRequest struct{ r *http.Request }

func (q httpRequest) Method() []byte { return []byte(q.r.Method) }

// Path is the escaped path, as received when the URL was parsed from a
// request line (url.URL keeps the raw form when it differs).
func (q httpRequest) Path() []byte { return []byte(q.r.URL.EscapedPath()) }

func (q httpRequest) Header(name string) []byte {
	v := q.r.Header[http.CanonicalHeaderKey(strings.ToLower(name))]
	if len(v) == 0 {
		return nil
	}
	return []byte(v[0])
}
