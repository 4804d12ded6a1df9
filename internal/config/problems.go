package config

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Problem is one thing wrong with a config.
type Problem struct {
	// File is the configuration file; "" when the config did not come from
	// a file.
	File string
	// Line is the 1-based line the problem is on; 0 when unknown (a Config
	// built in code). For a missing key it is the line of the mapping that
	// should hold it.
	Line int
	// Path is the key path, such as listeners[0].address; "" for problems
	// with the file as a whole (syntax errors, environment references).
	Path string
	// Msg says what is wrong and, in parentheses, what is allowed.
	Msg string
	// Warning marks something worth fixing that does not make the config
	// invalid (Config.Warnings), such as a certificate about to expire.
	Warning bool
}

// String formats p as FILE:LINE: key.path: what is wrong (what is allowed),
// leaving out the parts that are empty or zero; a warning's message starts
// with "WARNING: ".
func (p Problem) String() string {
	var b strings.Builder
	switch {
	case p.File != "" && p.Line > 0:
		b.WriteString(p.File + ":" + strconv.Itoa(p.Line) + ": ")
	case p.File != "":
		b.WriteString(p.File + ": ")
	case p.Line > 0:
		b.WriteString("line " + strconv.Itoa(p.Line) + ": ")
	}
	if p.Path != "" {
		b.WriteString(p.Path + ": ")
	}
	if p.Warning {
		b.WriteString("WARNING: ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Problems is every problem found in a config, sorted by line and then key
// path. It is the error type Parse, Load and Config.Validate return for an
// invalid config; use errors.As to get at the individual problems. Parse and
// Load put the config's warnings in it too, beside the errors (Errors leaves
// them out). A nil or empty Problems is never returned as an error, nor one
// of warnings only.
type Problems []Problem

// Errors returns the problems that make the config invalid, without the
// warnings, in order.
func (ps Problems) Errors() Problems {
	var out Problems
	for _, p := range ps {
		if !p.Warning {
			out = append(out, p)
		}
	}
	return out
}

// Error joins the problems' String forms with newlines.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// sort orders ps by line, then path, keeping the order of equal problems.
func (ps Problems) sort() {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Path, b.Path))
	})
}

// err returns ps sorted as an error, or nil when there are none. It exists
// so that an empty Problems never becomes a non-nil error interface.
func (ps Problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	ps.sort()
	return ps
}

// problemf returns a Problem with a formatted message.
func problemf(file string, line int, path, format string, args ...any) Problem {
	return Problem{File: file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)}
}
