package toolchain

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"strings"
)

// bundleMagic starts a clang offload bundle (clang-offload-bundler's binary
// format): magic, uint64 entry count, then per entry uint64 offset, uint64
// size, uint64 ID length and the ID, all little-endian.
const bundleMagic = "__CLANG_OFFLOAD_BUNDLE__"

// amdBundlePrefix starts the bundle ID of an AMDGPU code object (v4 or
// later) for a target ID: "hipv4-amdgcn-amd-amdhsa--gfx942".
const amdBundlePrefix = "hipv4-amdgcn-amd-amdhsa--"

// elfOSABIAMDGPUHSA is ELFOSABI_AMDGPU_HSA, the OS/ABI of HSA code objects.
const elfOSABIAMDGPUHSA = 64

// VerifyError is a code object that is not what was asked for.
type VerifyError struct {
	Path   string
	Target string // "" when it concerns the whole file
	Msg    string
}

func (e *VerifyError) Error() string {
	if e.Target == "" {
		return e.Path + ": " + e.Msg
	}
	return e.Path + ": " + e.Target + ": " + e.Msg
}

// Verify checks an AMD code object file: an offload bundle holding exactly
// one code object per target (a lone ELF is accepted for one target), each
// an AMDGPU HSA shared object whose EF_AMDGPU_MACH is that target's GPU,
// with at least one kernel and every name of symbols among its dynamic
// symbols.
func Verify(path string, targets, symbols []string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fail := func(target, format string, args ...any) error {
		return &VerifyError{Path: path, Target: target, Msg: fmt.Sprintf(format, args...)}
	}
	objs := map[string][]byte{}
	switch {
	case bytes.HasPrefix(b, []byte(bundleMagic)):
		entries, err := readBundle(b)
		if err != nil {
			return fail("", "%v", err)
		}
		for id, data := range entries {
			if t, ok := strings.CutPrefix(id, amdBundlePrefix); ok {
				objs[t] = data
			}
		}
	case bytes.HasPrefix(b, []byte(elf.ELFMAG)) && len(targets) == 1:
		objs[targets[0]] = b
	default:
		return fail("", "neither an offload bundle nor an AMDGPU ELF for one target")
	}
	has := strings.Join(sortedKeys(objs), ", ")
	for _, t := range targets {
		obj, ok := objs[t]
		if !ok {
			return fail(t, "no code object for it (has %s)", has)
		}
		if err := verifyELF(obj, t, symbols); err != nil {
			return fail(t, "%v", err)
		}
		delete(objs, t)
	}
	if len(objs) > 0 {
		return fail("", "code objects for targets not asked for: %s", strings.Join(sortedKeys(objs), ", "))
	}
	return nil
}

// readBundle splits an offload bundle into its entries by ID.
func readBundle(b []byte) (map[string][]byte, error) {
	le := binary.LittleEndian
	pos := len(bundleMagic)
	u64 := func() (uint64, error) {
		if pos+8 > len(b) {
			return 0, fmt.Errorf("offload bundle truncated at byte %d", pos)
		}
		v := le.Uint64(b[pos:])
		pos += 8
		return v, nil
	}
	n, err := u64()
	if err != nil {
		return nil, err
	}
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("offload bundle claims %d entries", n)
	}
	out := map[string][]byte{}
	for i := uint64(0); i < n; i++ {
		var off, size, idLen uint64
		for _, p := range []*uint64{&off, &size, &idLen} {
			if *p, err = u64(); err != nil {
				return nil, err
			}
		}
		if idLen > uint64(len(b)-pos) {
			return nil, fmt.Errorf("offload bundle entry %d: ID past the end", i)
		}
		id := string(b[pos : pos+int(idLen)])
		pos += int(idLen)
		if off > uint64(len(b)) || size > uint64(len(b))-off {
			return nil, fmt.Errorf("offload bundle entry %q: bytes %d+%d past the end (%d)", id, off, size, len(b))
		}
		if _, dup := out[id]; dup {
			return nil, fmt.Errorf("offload bundle has %q twice", id)
		}
		out[id] = b[off : off+size]
	}
	return out, nil
}

// verifyELF checks one code object for target.
func verifyELF(obj []byte, target string, symbols []string) error {
	f, err := elf.NewFile(bytes.NewReader(obj))
	if err != nil {
		return fmt.Errorf("not an ELF file: %v", err)
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB || f.Machine != elf.EM_AMDGPU ||
		f.OSABI != elfOSABIAMDGPUHSA || f.Type != elf.ET_DYN {
		return fmt.Errorf("not an AMDGPU HSA code object (%v %v %v, OS/ABI %d, %v)", f.Class, f.Data, f.Machine, f.OSABI, f.Type)
	}
	proc, err := amdProcessor(target)
	if err != nil {
		return err
	}
	flags, err := elfFlags(obj)
	if err != nil {
		return err
	}
	if got, want := flags&0xff, amdMach[proc]; got != want {
		return fmt.Errorf("EF_AMDGPU_MACH is %#x (%s), want %#x (%s)", got, machName(got), want, proc)
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return fmt.Errorf("no dynamic symbols: %v", err)
	}
	have := map[string]bool{}
	kernels := 0
	for _, s := range syms {
		have[s.Name] = true
		if strings.HasSuffix(s.Name, ".kd") {
			kernels++
		}
	}
	if kernels == 0 {
		return fmt.Errorf("holds no kernel (no .kd symbol)")
	}
	for _, s := range symbols {
		if !have[s] {
			return fmt.Errorf("lacks the symbol %s", s)
		}
	}
	return nil
}

// elfFlags reads e_flags of a 64-bit little-endian ELF (debug/elf does not
// keep it).
func elfFlags(obj []byte) (uint32, error) {
	const off = 48 // e_flags in Elf64_Ehdr
	if len(obj) < off+4 {
		return 0, fmt.Errorf("ELF header truncated")
	}
	return binary.LittleEndian.Uint32(obj[off:]), nil
}

func machName(m uint32) string {
	for p, v := range amdMach {
		if v == m {
			return p
		}
	}
	return "not a GPU irisgen builds for"
}

func sortedKeys(m map[string][]byte) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	if len(ks) == 0 {
		return []string{"none"}
	}
	return ks
}
