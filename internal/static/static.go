// Package static serves files from a directory: the `static` route action.
//
// Files are opened through os.Root, so no path (dot segments, symlinks)
// can reach outside the root. http.ServeContent does Range requests and
// conditional requests (If-Modified-Since, If-None-Match with the ETag set
// here). Directories serve their index file; there are no listings.
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

// Handler serves files below one root directory.
type Handler struct {
	root        *os.Root
	index       string
	stripPrefix string
}

// New opens root. index names the file served for a directory ("" means
// index.html); stripPrefix is removed from the request path before it is
// looked up ("" removes nothing).
func New(root, index, stripPrefix string) (*Handler, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("opening static root: %w", err)
	}
	if index == "" {
		index = "index.html"
	}
	return &Handler{root: r, index: index, stripPrefix: stripPrefix}, nil
}

// Close releases the root directory.
func (h *Handler) Close() error { return h.root.Close() }

// ServeHTTP serves the file named by the request path.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "405 Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	if h.stripPrefix != "" {
		p = strings.TrimPrefix(p, h.stripPrefix)
	}
	// Clean to a root-relative name; os.Root refuses anything escaping.
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
			// Relative links in the index need the trailing slash.
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
	// A weak validator from size and modification time, as nginx does.
	w.Header().Set("ETag", fmt.Sprintf(`"%x-%x"`, st.ModTime().Unix(), st.Size()))
	http.ServeContent(w, r, st.Name(), st.ModTime(), f)
}

func (h *Handler) error(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		http.Error(w, "404 Not Found", http.StatusNotFound)
	case errors.Is(err, fs.ErrPermission):
		http.Error(w, "403 Forbidden", http.StatusForbidden)
	default:
		// Escape attempts through symlinks land here too.
		http.Error(w, "404 Not Found", http.StatusNotFound)
	}
}
