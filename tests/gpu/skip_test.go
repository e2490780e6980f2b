//go:build !gpu

package gpu_test

import "testing"

// TestGPUSuiteSkipped makes the skip visible in CPU-only runs (CI): the GPU
// suite lives behind the `gpu` build tag.
func TestGPUSuiteSkipped(t *testing.T) {
	t.Skip("GPU suite not built: it needs the `gpu` build tag and GPUs; run `make test-gpu` on a GPU machine")
}
