package core

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHeaderAgrees: the layouts and codes the runtime shares with the
// device header (runtime/include/irisgen.h) are the same on both sides:
// the ctx's fields in order, the control block, the error codes.
func TestHeaderAgrees(t *testing.T) {
	b, err := os.ReadFile("../../include/irisgen.h")
	require.NoError(t, err)
	h := string(b)
	define := func(name string) int {
		m := regexp.MustCompile(`(?m)^#define ` + name + ` (\d+)u?$`).FindStringSubmatch(h)
		require.NotNil(t, m, "#define %s", name)
		n, _ := strconv.Atoi(m[1])
		return n
	}
	assert.Equal(t, MaxWorld, define("IRISGEN_MAX_WORLD"))
	assert.Equal(t, ControlRing, define("IRISGEN_RING"))
	assert.Equal(t, ErrCodeTimeout, define("IRISGEN_ERR_TIMEOUT"))
	assert.Equal(t, ErrCodeIndex, define("IRISGEN_ERR_INDEX"))
	assert.Equal(t, ErrCodeCapacity, define("IRISGEN_ERR_CAPACITY"))
	assert.Equal(t, ErrCodeMismatch, define("IRISGEN_ERR_MISMATCH"))
	assert.Equal(t, ErrCodeRefused, define("IRISGEN_ERR_REFUSED"))

	// The fields of a struct (typedef struct { } typ; or struct typ { };),
	// with their byte offsets.
	fields := func(typ string) map[string]int {
		var body string
		if i := strings.Index(h, "} "+typ+";"); i >= 0 {
			body = h[strings.LastIndex(h[:i], "typedef struct {"):i]
		} else {
			i = strings.Index(h, "struct "+typ+" {")
			require.Positive(t, i, typ)
			body = h[i : i+strings.Index(h[i:], "\n};")]
		}
		sizes := map[string]int{"uint64_t": 8, "uint32_t": 4, "int32_t": 4}
		out, off := map[string]int{}, 0
		for _, m := range regexp.MustCompile(`(?m)^\s*(u?int\d+_t) (\w+)(\[(\w+)\])?;`).FindAllStringSubmatch(body, -1) {
			n := 1
			if m[4] != "" {
				n = define(m[4])
			}
			out[m[2]] = off
			off += sizes[m[1]] * n
		}
		out["(size)"] = off
		return out
	}
	ctx := fields("irisgen_ctx")
	assert.Equal(t, map[string]int{"base": 0, "flags": CtxOffFlags, "epochs": CtxOffEpochs, "err": CtxOffErr,
		"timeout_us": CtxOffTimeout, "launch": CtxOffLaunch, "rank": CtxOffRank, "world": CtxOffWorld,
		"barrier": CtxOffBarrier, "check": CtxOffCheck, "(size)": CtxBytes}, ctx)
	assert.Equal(t, map[string]int{"refused": OffRefused, "begun": OffBegun, "(size)": ControlUsed}, fields("control"))
	assert.Equal(t, map[string]int{"code": 0, "rank": 4, "peer": 8, "block": 12, "epoch": 16, "info": 24, "(size)": ErrRecordBytes},
		fields("irisgen_error"))
}
