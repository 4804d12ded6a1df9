package rules

import "unsafe"

// unsafeString views b as a string, for a lookup that keeps nothing.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
