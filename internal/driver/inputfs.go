package driver

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/irisgen/irisgen/internal/config"
)

// InputFS is the directory dir as a file system that reads only regular
// files of at most config.MaxFileBytes: a spec or template that is a FIFO,
// a device or a huge file is refused before it is read, with an error that
// says why. Stat and ReadDir see everything, so a refused file is reported
// as unreadable rather than as missing.
func InputFS(dir string) fs.FS {
	return inputFS{dir: dir, fsys: os.DirFS(dir), read: &Inputs{}}
}

type inputFS struct {
	dir  string
	fsys fs.FS
	read *Inputs
}

// Inputs are the files a run read, so that it never replaces or removes
// one of them (an input inside the output, through a link or a layout the
// config did not refuse).
type Inputs struct {
	mu    sync.Mutex
	files []fs.FileInfo
	paths []string
}

// add records the file at path, st its os.Stat.
func (in *Inputs) add(path string, st fs.FileInfo) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.files = append(in.files, st)
	in.paths = append(in.paths, path)
}

// Read returns the path under which the run read the file at path (the
// same file, whatever the link or name), "" when it did not.
func (in *Inputs) Read(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return ""
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	for i, f := range in.files {
		if os.SameFile(f, st) {
			return in.paths[i]
		}
	}
	return ""
}

// inputsOf returns the record of an InputFS, nil for another fs.FS.
func inputsOf(fsys fs.FS) *Inputs {
	if f, ok := fsys.(inputFS); ok {
		return f.read
	}
	return nil
}

func (f inputFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(f.fsys, name) }

func (f inputFS) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(f.fsys, name) }

// Open opens directories and the files ReadFile would read.
func (f inputFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	full := filepath.Join(f.dir, filepath.FromSlash(name))
	st, err := os.Stat(full)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: unwrapPath(err)}
	}
	if !st.IsDir() {
		if err := config.CheckFile(st); err != nil {
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		}
		f.read.add(full, st)
	}
	return f.fsys.Open(name)
}

// ReadFile reads name, refusing more than config.MaxFileBytes even when the
// file grows after it was checked.
func (f inputFS) ReadFile(name string) ([]byte, error) {
	r, err := f.Open(name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, config.MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > config.MaxFileBytes {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("more than irisgen reads from one file (%d bytes)", config.MaxFileBytes)}
	}
	return b, nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
