package toolchain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/irisgen/irisgen/runtime/irismodel"
)

// Build compiles kernel sources with one compiler. Prepare makes it; Close
// removes what it wrote.
type Build struct {
	c       *Compiler
	tmp     string
	include string // -I directory holding the device header
	devLibs string // --rocm-device-lib-path of a clang; "" for its default
}

// Prepare writes what every compile needs into a temporary directory: the
// device header from include (a file system whose root is the include
// directory), and for a clang the device-library directory (see
// deviceLibs).
func (c *Compiler) Prepare(ctx context.Context, include fs.FS) (*Build, error) {
	tmp, err := os.MkdirTemp("", "irisgen-build-")
	if err != nil {
		return nil, err
	}
	b := &Build{c: c, tmp: tmp, include: filepath.Join(tmp, "include")}
	if err := os.CopyFS(b.include, include); err != nil {
		b.Close()
		return nil, fmt.Errorf("writing the device header: %w", err)
	}
	if c.Kind == Clang {
		mk := func(path string, v int) error { return c.isaLibrary(ctx, path, v) }
		if b.devLibs, err = deviceLibs(deviceLibDirs(os.Getenv), c.Targets, tmp, mk); err != nil {
			b.Close()
			return nil, err
		}
	}
	return b, nil
}

// Close removes the build's temporary directory.
func (b *Build) Close() error { return os.RemoveAll(b.tmp) }

// Args is the compiler's command line for one source.
func (b *Build) Args(src, dst string) []string {
	if b.c.Kind == Nvcc {
		return nvccArgs(b.c.Targets, b.include, src, dst)
	}
	return hipArgs(b.c.Kind, b.c.Targets, b.devLibs, b.include, src, dst)
}

// Compile builds src into dst and returns the compiler's output. An AMD
// code object must pass Verify with the symbols, else it is an error. dst
// is replaced only by a complete, checked file, and a failure removes it:
// a code object of an older source must not outlive a compile of the new
// one (a program built afterwards would embed it).
func (b *Build) Compile(ctx context.Context, src, dst string, symbols ...string) ([]byte, error) {
	tmp := dst + ".tmp"
	cmd := exec.CommandContext(ctx, b.c.Path, b.Args(src, tmp)...)
	if b.c.Kind == Hipcc {
		cmd.Env = append(os.Environ(), hipccEnv...)
	}
	out, err := cmd.CombinedOutput()
	if p, _ := Lookup(b.c.Platform); err == nil && p.Verify != nil {
		err = p.Verify(tmp, b.c.Targets, symbols)
		var ve *VerifyError
		if errors.As(err, &ve) {
			ve.Path = dst // what the compiler made, under the name it was for
		}
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		if rm := os.Remove(dst); rm != nil && !errors.Is(rm, fs.ErrNotExist) {
			err = fmt.Errorf("%w; the previous %s could not be removed: %v", err, filepath.Base(dst), rm)
		}
		return out, err
	}
	return out, nil
}

// CompileAll compiles every source (<module>.hip) into dst, each into its
// module's code object (Compiler.File) holding the module's spec hash
// symbol, with jobs files at a time. It prints a line to stdout per file
// done, and the compiler's output (the errors of a failure, the warnings
// of a success) to stderr, naming files by name. It returns the number of
// failures.
func (b *Build) CompileAll(ctx context.Context, srcs []string, dst string, jobs int, stdout, stderr io.Writer, name func(string) string) int {
	var (
		mu     sync.Mutex
		done   int
		failed int
		wg     sync.WaitGroup
	)
	next := make(chan string)
	for w := 0; w < min(jobs, len(srcs)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for src := range next {
				module := strings.TrimSuffix(filepath.Base(src), ".hip")
				out, err := b.Compile(ctx, src, filepath.Join(dst, b.c.File(module)), irismodel.SpecHashSymbol(module))
				mu.Lock()
				done++
				fmt.Fprintf(stdout, "[%d/%d] %s\n", done, len(srcs), filepath.Base(src))
				if err != nil {
					failed++
					fmt.Fprintf(stderr, "%s: compile failed: %v\n", name(src), err)
				} else if len(bytes.TrimSpace(out)) > 0 {
					fmt.Fprintf(stderr, "%s: compiled, with this output from the compiler:\n", name(src))
				}
				if len(bytes.TrimSpace(out)) > 0 {
					fmt.Fprintf(stderr, "%s\n", bytes.TrimRight(out, "\n"))
				}
				mu.Unlock()
			}
		}()
	}
	for _, s := range srcs {
		next <- s
	}
	close(next)
	wg.Wait()
	return failed
}
