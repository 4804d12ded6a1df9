package upstream

// Hashes shared by the pipeline, which hashes request keys, and the
// strategies, which hash them onto backends. Both are fixed by
// specification, unlike hash/maphash, whose seed changes per process: a
// key must map alike across restarts and across Helios instances.

// fnvOffset is FNV-1a's initial value.
const fnvOffset = 14695981039346656037

// HashBytes returns the 64-bit FNV-1a hash of b.
func HashBytes(b []byte) uint64 {
	h := uint64(fnvOffset)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// HashString returns the 64-bit FNV-1a hash of s, as HashBytes would.
func HashString(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// Mix is the splitmix64 finalizer: a bijection whose every output bit
// depends on every input bit, so that hashes derived from one key (salted
// by a constant or by a backend's hash) are independent of each other even
// when keys are alike.
func Mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
