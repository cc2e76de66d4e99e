package envserver

import "github.com/shinken-rl/shinken/envserver/api"

// DefaultLimits is the limits table with the given batch and body caps (0:
// their defaults). Every per-field cap of a request lives here, is
// enforced while the body is decoded, and is advertised in /v1/spec.
func DefaultLimits(maxBatch, maxBodyBytes int) api.Limits {
	if maxBatch <= 0 {
		maxBatch = 64
	}
	if maxBodyBytes <= 0 {
		maxBodyBytes = 8 << 20
	}
	return api.Limits{
		MaxBatch:          maxBatch,
		MaxBodyBytes:      maxBodyBytes,
		MaxActionsPerStep: 64,
		MaxHave:           4096,
		MaxTextBytes:      64 << 10,
		MaxKeyChord:       8,
		MaxArgBytes:       4096,
		MaxArgs:           64,
		MaxTokens:         1 << 18,
		MaxRequestIDBytes: 128,
		MaxDecodeFactor:   48,
	}
}
