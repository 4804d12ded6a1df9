package server

import (
	"github.com/helios-lb/helios/internal/compress"
	"github.com/helios-lb/helios/internal/config"
)

// compressPolicy builds a route's compression policy from its validated
// compress block; nil (no error) when the route has none. Each route,
// in each generation, has a policy and an encoder pool of its own.
func compressPolicy(c *config.Compress) (*compress.Policy, error) {
	if c == nil {
		return nil, nil
	}
	minBytes := c.MinBytes
	if minBytes == 0 {
		minBytes = -1 // the key's 0 is "every size"; the policy's is its default
	}
	return compress.NewPolicy(compress.Options{
		Codings:     config.Codings(c.Encodings),
		Types:       c.Types,
		MinBytes:    minBytes,
		GzipLevel:   c.Level,
		ZstdLevel:   c.ZstdLevel,
		BrotliLevel: c.BrotliLevel,
	})
}
