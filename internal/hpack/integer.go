package hpack

// readInt reads an integer with an n-bit prefix (RFC 7541 §5.1) from
// the start of p, returning it and the bytes it took. As x/net's
// decoder, it accepts redundant continuation bytes but no more than
// nine: past 63 bits of shift is ErrIntegerOverflow.
func readInt(p []byte, n uint8) (v uint64, size int, err error) {
	if len(p) == 0 {
		return 0, 0, ErrTruncated
	}
	mask := uint64(1)<<n - 1
	v = uint64(p[0]) & mask
	if v < mask {
		return v, 1, nil
	}
	var shift uint
	for i := 1; i < len(p); i++ {
		b := p[i]
		v += uint64(b&0x7f) << shift
		if b&0x80 == 0 {
			return v, i + 1, nil
		}
		shift += 7
		if shift >= 63 {
			return 0, 0, ErrIntegerOverflow
		}
	}
	return 0, 0, ErrTruncated
}

// appendInt appends v with an n-bit prefix (RFC 7541 §5.1); the first
// byte's bits above the prefix are first's.
func appendInt(dst []byte, first byte, n uint8, v uint64) []byte {
	mask := uint64(1)<<n - 1
	if v < mask {
		return append(dst, first|byte(v))
	}
	dst = append(dst, first|byte(mask))
	v -= mask
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}
