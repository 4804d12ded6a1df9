package static

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strings"
)

// legacyHandler is the static handler as it was before the planner
// (commit 30b4cc7): http.ServeContent behind os.Root. The differential
// tests hold the planner to its answers.
type legacyHandler struct {
	root        *os.Root
	index       string
	stripPrefix string
}

func (h *legacyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "405 Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	if h.stripPrefix != "" {
		p = strings.TrimPrefix(p, h.stripPrefix)
	}
	name := strings.TrimPrefix(path.Clean("/"+p), "/")
	if name == "" {
		name = "."
	}
	f, err := h.root.Open(name)
	if err != nil {
		h.error(w, err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		h.error(w, err)
		return
	}
	if st.IsDir() {
		if !strings.HasSuffix(r.URL.Path, "/") {
			http.Redirect(w, r, r.URL.Path+"/", http.StatusMovedPermanently)
			return
		}
		f.Close()
		name = path.Join(name, h.index)
		if f, err = h.root.Open(name); err != nil {
			h.error(w, err)
			return
		}
		defer f.Close()
		if st, err = f.Stat(); err != nil || st.IsDir() {
			http.Error(w, "404 Not Found", http.StatusNotFound)
			return
		}
	}
	if !st.Mode().IsRegular() {
		http.Error(w, "404 Not Found", http.StatusNotFound)
		return
	}
	w.Header().Set("ETag", fmt.Sprintf(`"%x-%x"`, st.ModTime().Unix(), st.Size()))
	http.ServeContent(w, r, st.Name(), st.ModTime(), f)
}

func (h *legacyHandler) error(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		http.Error(w, "404 Not Found", http.StatusNotFound)
	case errors.Is(err, fs.ErrPermission):
		http.Error(w, "403 Forbidden", http.StatusForbidden)
	default:
		http.Error(w, "404 Not Found", http.StatusNotFound)
	}
}
