package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// TestOwnBlocks: the catalogue's variants that run with the input as the
// rank's own block of the output (timed both ways) are all_gather
// copy_push's input in its output, and no other.
func TestOwnBlocks(t *testing.T) {
	got := map[string][][2]int{}
	for _, e := range collectives.Catalogue {
		if ob := ownBlocks(e); ob != nil {
			got[e.Collective+"/"+e.Variant] = ob
		}
	}
	assert.Equal(t, map[string][][2]int{"all_gather/copy_push": {{0, 1}}}, got)
}

// TestChain: the rmsnorm scenario's description resolves against the
// catalogue into the launches the old hand-written path made: the grid
// with tokens outermost, every fused variant, the unfused path's all_reduce
// variants but those slow by design, its sizes as products of the grid's,
// the norm reading the all_reduce's output, rows of one rank's input.
func TestChain(t *testing.T) {
	c := rmsnormScenario().chain
	require.NotNil(t, c)
	ps := points([]axis{{"tokens", []int64{1, 2}}, {"hidden", []int64{8, 16}}})
	assert.Equal(t, []point{{"tokens": 1, "hidden": 8}, {"tokens": 1, "hidden": 16}, {"tokens": 2, "hidden": 8}, {"tokens": 2, "hidden": 16}}, ps)
	assert.Equal(t, []string{"one_shot", "one_shot_lamport", "two_shot"}, choices(collectives.Catalogue, c.call))
	assert.Equal(t, []string{"one_shot", "one_shot_staged", "one_shot_push", "one_shot_lamport", "two_shot", "ring"}, choices(collectives.Catalogue, c.baseline))
	assert.Equal(t, []string{""}, choices(collectives.Catalogue, []link{{collective: "residual_rmsnorm", variant: "local"}}))

	p := point{"tokens": 3, "hidden": 7168}
	steps, err := resolve(collectives.Catalogue, c.baseline, c.dtype, p, "two_shot")
	require.NoError(t, err)
	require.Len(t, steps, 2)
	assert.Equal(t, "all_reduce two_shot, then residual_rmsnorm local", describe(steps))
	assert.Equal(t, []int64{3 * 7168}, steps[0].sizes)
	assert.Equal(t, []int64{3, 7168}, steps[1].sizes)
	assert.Equal(t, map[int]stepTensor{0: {0, 1}}, steps[1].from, "the norm's input is the all_reduce's output")
	fused, err := resolve(collectives.Catalogue, c.call, c.dtype, p, "one_shot")
	require.NoError(t, err)
	assert.Equal(t, int64(3*7168*2), bytesOf(fused[0], 2), "one rank's input")
	assert.Equal(t, irismodel.BarrierNone, benchMode(steps[1].e), "residual_rmsnorm has mode none only")
	assert.Equal(t, irismodel.BarrierDevice, benchMode(steps[0].e))

	_, err = resolve(collectives.Catalogue, c.call, c.dtype, p, "nope")
	require.ErrorContains(t, err, "the package has no all_reduce_rmsnorm/nope")
	for _, ref := range []tensorRef{{0, "nope"}, {1, "output"}, {5, "output"}, {-1, "output"}} {
		bad := []link{c.baseline[0], {collective: "residual_rmsnorm", variant: "local", sizes: c.baseline[1].sizes, from: map[string]tensorRef{"input": ref}}}
		_, err = resolve(collectives.Catalogue, bad, c.dtype, p, "one_shot")
		require.ErrorContains(t, err, "no such tensor in an earlier link", "%+v", ref)
	}
}
