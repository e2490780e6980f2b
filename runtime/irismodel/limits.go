package irismodel

// MaxWorld is the most ranks a world or group has: the device header's
// IRISGEN_MAX_WORLD, the length of irisgen_ctx.base (runtime/internal/core
// checks the two agree). A tuning rule's world is at most this, and the
// generator checks a copy schedule on every world up to it.
const MaxWorld = 8

// The limits of a variant's launch shape (the spec's launch key): threads a
// multiple of ThreadStep (the AMD wavefront) up to MaxThreads (the hardware
// block limit), at most MaxBlocks blocks.
const (
	ThreadStep = 64
	MaxThreads = 1024
	MaxBlocks  = 1024
)
