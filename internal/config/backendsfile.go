package config

import (
	"fmt"
	"io/fs"
	"os"
	"reflect"
)

// MaxBackendsFileBytes bounds the size of a backends file: what is read
// is a list of addresses, and a path that names something else (a device,
// a huge log) must not be read whole.
const MaxBackendsFileBytes = 16 << 20

// ReadBackendsFile reads the backends file at path: a regular file of at
// most MaxBackendsFileBytes (a FIFO or a device would block or never
// end). fi is what a stat of path found.
func ReadBackendsFile(path string, fi fs.FileInfo) ([]byte, error) {
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file", path)
	case fi.Size() > MaxBackendsFileBytes:
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxBackendsFileBytes)
	}
	return os.ReadFile(path)
}

// FileBackend is one entry of a backends file (Upstream.BackendsFile).
type FileBackend struct {
	// Address is host:port, as for Backend.Address. Required, unique
	// within the file.
	Address string `yaml:"address"`
	// Weight is the backend's share under weighted strategies, 1-1000.
	// Default 1.
	Weight int `yaml:"weight"`
}

// ParseBackends reads a backends file: a YAML or JSON list of
// {address, weight}. It decodes as strictly as Parse (unknown keys,
// duplicate keys and values of the wrong type are problems), fills the
// default weight and checks every entry. No ${VAR} is expanded: the file is
// data that tools write. An empty list is not a problem here: whether it
// may empty an upstream is Upstream.AllowEmpty's call. file names the file
// in problems, which are an error of type Problems, sorted by line, each
// FILE:LINE: [N].key: message.
func ParseBackends(data []byte, file string) ([]FileBackend, error) {
	m := newMeta()
	var list []FileBackend
	var problems Problems
	if !decodeDocument(data, file, m, reflect.ValueOf(&list).Elem(), &problems) {
		return nil, problems.err()
	}
	v := validator{file: file, meta: m}
	addrs := make(map[string]string)
	for i := range list {
		b, p := &list[i], indexPath("", i)
		setDefault(m, p+".weight", &b.Weight, 1)
		v.uniqueAddress(addrs, p, b.Address, "")
		v.intRange(p+".weight", b.Weight, 1, 1000)
	}
	problems = append(problems, v.problems...)
	if err := problems.err(); err != nil {
		return nil, err
	}
	return list, nil
}
