package route

import "unsafe"

// unsafeString views b as a string, for a comparison that keeps nothing.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
