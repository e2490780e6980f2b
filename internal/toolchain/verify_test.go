package toolchain

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// codeObject is what fakeELF writes.
type codeObject struct {
	machine elf.Machine
	osabi   byte
	typ     elf.Type
	flags   uint32
	symbols []string
}

func amdObject(proc string, symbols ...string) codeObject {
	// 0x500: xnack and sramecc "any", as clang writes them for a bare target.
	return codeObject{machine: elf.EM_AMDGPU, osabi: elfOSABIAMDGPUHSA, typ: elf.ET_DYN, flags: 0x500 | amdMach[proc], symbols: symbols}
}

// fakeELF writes a minimal 64-bit ELF: header, .dynsym, .dynstr, .shstrtab.
func fakeELF(t *testing.T, o codeObject) []byte {
	t.Helper()
	le := binary.LittleEndian
	dynstr := []byte{0}
	var syms bytes.Buffer
	binary.Write(&syms, le, elf.Sym64{})
	for _, s := range o.symbols {
		binary.Write(&syms, le, elf.Sym64{Name: uint32(len(dynstr)), Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC), Shndx: 1})
		dynstr = append(append(dynstr, s...), 0)
	}
	shstr := []byte("\x00.dynsym\x00.dynstr\x00.shstrtab\x00")
	const ehSize = 64
	dynstrOff := uint64(ehSize)
	shstrOff := dynstrOff + uint64(len(dynstr))
	symOff := (shstrOff + uint64(len(shstr)) + 7) &^ 7
	shOff := symOff + uint64(syms.Len())
	var b bytes.Buffer
	h := elf.Header64{Type: uint16(o.typ), Machine: uint16(o.machine), Version: 1, Shoff: shOff, Flags: o.flags,
		Ehsize: ehSize, Shentsize: 64, Shnum: 4, Shstrndx: 3}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION], h.Ident[elf.EI_OSABI] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), 1, o.osabi
	binary.Write(&b, le, h)
	b.Write(dynstr)
	b.Write(shstr)
	b.Write(make([]byte, symOff-uint64(b.Len())))
	b.Write(syms.Bytes())
	for _, s := range []elf.Section64{
		{},
		{Name: 1, Type: uint32(elf.SHT_DYNSYM), Off: symOff, Size: uint64(syms.Len()), Link: 2, Info: 1, Addralign: 8, Entsize: 24},
		{Name: 9, Type: uint32(elf.SHT_STRTAB), Off: dynstrOff, Size: uint64(len(dynstr)), Addralign: 1},
		{Name: 17, Type: uint32(elf.SHT_STRTAB), Off: shstrOff, Size: uint64(len(shstr)), Addralign: 1},
	} {
		binary.Write(&b, le, s)
	}
	return b.Bytes()
}

type bundleEntry struct {
	id   string
	data []byte
}

// fakeBundle writes entries in clang-offload-bundler's binary format.
func fakeBundle(entries ...bundleEntry) []byte {
	le := binary.LittleEndian
	var head bytes.Buffer
	head.WriteString(bundleMagic)
	binary.Write(&head, le, uint64(len(entries)))
	size := head.Len()
	for _, e := range entries {
		size += 24 + len(e.id)
	}
	off := uint64(size)
	for _, e := range entries {
		binary.Write(&head, le, off)
		binary.Write(&head, le, uint64(len(e.data)))
		binary.Write(&head, le, uint64(len(e.id)))
		head.WriteString(e.id)
		off += uint64(len(e.data))
	}
	for _, e := range entries {
		head.Write(e.data)
	}
	return head.Bytes()
}

// TestVerify enumerates what makes a code object file wrong.
func TestVerify(t *testing.T) {
	syms := []string{"irisgen_barrier_device", "irisgen_barrier_device.kd", "irisgen_spec_hash_barrier"}
	obj := func(proc string) []byte { return fakeELF(t, amdObject(proc, syms...)) }
	host := bundleEntry{"host-x86_64-unknown-linux--", nil}
	entry := func(target string, data []byte) bundleEntry { return bundleEntry{amdBundlePrefix + target, data} }
	good := fakeBundle(entry("gfx90a", obj("gfx90a")), host, entry("gfx940", obj("gfx940")), entry("gfx942", obj("gfx942")))
	wrongMachine := amdObject("gfx942", syms...)
	wrongMachine.machine = elf.EM_X86_64
	hostABI := amdObject("gfx942", syms...)
	hostABI.osabi = 0
	relocatable := amdObject("gfx942", syms...)
	relocatable.typ = elf.ET_REL
	three := []string{"gfx90a", "gfx940", "gfx942"}
	for _, c := range []struct {
		name    string
		file    []byte
		targets []string
		want    string // "" for valid
	}{
		{"bundle of three", good, three, ""},
		{"bundle, features in the target ID", fakeBundle(entry("gfx942:xnack-", obj("gfx942"))), []string{"gfx942:xnack-"}, ""},
		{"lone ELF for one target", obj("gfx942"), []string{"gfx942"}, ""},
		{"lone ELF for two targets", obj("gfx942"), []string{"gfx90a", "gfx942"}, "neither an offload bundle nor"},
		{"target missing", fakeBundle(entry("gfx90a", obj("gfx90a")), host), []string{"gfx90a", "gfx942"}, "gfx942: no code object for it (has gfx90a)"},
		{"target not asked for", good, []string{"gfx90a", "gfx942"}, "targets not asked for: gfx940"},
		{"gfx940 object labelled gfx942", fakeBundle(entry("gfx942", obj("gfx940"))), []string{"gfx942"}, "EF_AMDGPU_MACH is 0x40 (gfx940), want 0x4c (gfx942)"},
		{"unknown GPU", fakeBundle(entry("gfx942", fakeELF(t, codeObject{elf.EM_AMDGPU, elfOSABIAMDGPUHSA, elf.ET_DYN, 0x2c, syms}))), []string{"gfx942"}, "EF_AMDGPU_MACH is 0x2c (not a GPU irisgen builds for)"},
		{"x86 ELF", fakeBundle(entry("gfx942", fakeELF(t, wrongMachine))), []string{"gfx942"}, "not an AMDGPU HSA code object"},
		{"not HSA", fakeBundle(entry("gfx942", fakeELF(t, hostABI))), []string{"gfx942"}, "OS/ABI 0"},
		{"not linked", fakeBundle(entry("gfx942", fakeELF(t, relocatable))), []string{"gfx942"}, "ET_REL"},
		{"no kernel", fakeBundle(entry("gfx942", fakeELF(t, amdObject("gfx942", "irisgen_spec_hash_barrier")))), []string{"gfx942"}, "holds no kernel"},
		{"symbol missing", fakeBundle(entry("gfx942", fakeELF(t, amdObject("gfx942", "k", "k.kd")))), []string{"gfx942"}, "lacks the symbol irisgen_spec_hash_barrier"},
		{"entry not an ELF", fakeBundle(entry("gfx942", []byte("not an elf"))), []string{"gfx942"}, "not an ELF file"},
		{"truncated bundle", good[:40], three, "truncated"},
		{"entry past the end", good[:len(good)-10], three, "past the end"},
		{"duplicate entry", fakeBundle(entry("gfx942", obj("gfx942")), entry("gfx942", obj("gfx942"))), []string{"gfx942"}, "twice"},
		{"compiler stdout", []byte("clang: error: something\n"), three, "neither an offload bundle nor"},
		{"empty", nil, three, "neither an offload bundle nor"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "barrier.hsaco")
			os.WriteFile(p, c.file, 0o644)
			err := Verify(p, c.targets, []string{"irisgen_spec_hash_barrier"})
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ve *VerifyError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), p+": ") {
				t.Errorf("Verify = %v, want a *VerifyError with %q", err, c.want)
			}
		})
	}
	if err := Verify(filepath.Join(t.TempDir(), "none.hsaco"), three, nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
