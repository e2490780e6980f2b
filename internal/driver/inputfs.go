package driver

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/irisgen/irisgen/internal/config"
)

// InputFS is the directory dir as a file system that reads only regular
// files of at most config.MaxFileBytes: a spec or template that is a FIFO,
// a device or a huge file is refused before it is read, with an error that
// says why. Stat and ReadDir see everything, so a refused file is reported
// as unreadable rather than as missing.
func InputFS(dir string) fs.FS {
	return inputFS{dir: dir, fsys: os.DirFS(dir)}
}

type inputFS struct {
	dir  string
	fsys fs.FS
}

func (f inputFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(f.fsys, name) }

func (f inputFS) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(f.fsys, name) }

// Open opens directories and the files ReadFile would read.
func (f inputFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	st, err := os.Stat(filepath.Join(f.dir, filepath.FromSlash(name)))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: unwrapPath(err)}
	}
	if !st.IsDir() {
		if err := config.CheckFile(st); err != nil {
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		}
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
