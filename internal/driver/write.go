package driver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ForeignError is Write's refusal to replace files irisgen did not
// generate.
type ForeignError struct {
	Out     string
	Changes []Change // the Foreign ones
}

func (e *ForeignError) Error() string {
	return e.Message(func(k string) string { return filepath.Join(e.Out, filepath.FromSlash(k)) })
}

// Message is the error with every path named by name (from the slash path
// under Out).
func (e *ForeignError) Message(name func(string) string) string {
	lines := make([]string, len(e.Changes))
	for i, c := range e.Changes {
		lines[i] = fmt.Sprintf("%s (%s)", name(c.Path), c.Why)
	}
	what := "overwrite what irisgen did not generate"
	for _, c := range e.Changes {
		if c.Input {
			what = "overwrite or remove what irisgen did not generate or this run read as an input"
		}
	}
	return fmt.Sprintf("refusing to %s:\n  %s\nmove it away or rename it, or generate into another directory (-out, -package)",
		what, strings.Join(lines, "\n  "))
}

// rename is os.Rename; tests make it fail.
var rename = os.Rename

// Write applies changes to the output directory: creates and updates
// files, removes stale generated ones. It is all or nothing: every new
// content is written to a temporary file beside its target first, then the
// files are renamed into place; if anything fails, what was done is undone
// and the output is as before. A Foreign change fails the whole write
// before anything is touched.
func (p *Project) Write(changes []Change) error {
	var foreign []Change
	for _, c := range changes {
		if c.Kind == Foreign {
			foreign = append(foreign, c)
		}
	}
	if len(foreign) > 0 {
		return &ForeignError{Out: p.Out, Changes: foreign}
	}
	t := &txn{pkg: p.Package}
	if err := t.run(p.Out, changes); err != nil {
		if uerr := t.undo(); uerr != nil {
			return fmt.Errorf("%w; undoing the partial write also failed, check %s by hand: %v", err, p.Out, uerr)
		}
		return err
	}
	t.finish()
	return nil
}

// txn is one Write: what it did, so that it can be undone.
type txn struct {
	pkg     string   // the generated package, named by tombstones
	dirs    []string // created, outermost first
	temps   []string // new contents not yet in place
	undos   []func() error
	backups []string // old files, removed when the write succeeds
}

func (t *txn) run(out string, changes []Change) error {
	type move struct{ temp, target string }
	var moves []move
	var removes []string
	// Stage every new content beside its target.
	for _, c := range changes {
		target := filepath.Join(out, filepath.FromSlash(c.Path))
		switch c.Kind {
		case Create, Update, Empty:
			if err := t.mkdirAll(filepath.Dir(target)); err != nil {
				return err
			}
			b := c.New
			if c.Kind == Empty {
				b = Tombstone(t.pkg)
			}
			tmp, err := writeTemp(filepath.Dir(target), filepath.Base(target), b)
			if err != nil {
				return err
			}
			t.temps = append(t.temps, tmp)
			moves = append(moves, move{tmp, target})
		case Remove:
			removes = append(removes, target)
		}
	}
	// Put them in place, keeping every replaced or removed file as a
	// backup until the end.
	for _, m := range moves {
		if _, err := os.Lstat(m.target); err == nil {
			if err := t.backup(m.target); err != nil {
				return err
			}
		}
		if err := rename(m.temp, m.target); err != nil {
			return err
		}
		target, temp := m.target, m.temp
		t.undos = append(t.undos, func() error { return os.Rename(target, temp) })
	}
	for _, r := range removes {
		if err := t.backup(r); err != nil {
			return err
		}
	}
	return nil
}

// backup moves target aside, to be restored by undo or deleted by finish.
func (t *txn) backup(target string) error {
	bak := filepath.Join(filepath.Dir(target), ".irisgen-old-"+filepath.Base(target))
	if err := rename(target, bak); err != nil {
		return err
	}
	t.backups = append(t.backups, bak)
	t.undos = append(t.undos, func() error { return os.Rename(bak, target) })
	return nil
}

func (t *txn) mkdirAll(dir string) error {
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if err := t.mkdirAll(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	t.dirs = append(t.dirs, dir)
	return nil
}

// undo reverses the renames, deletes the temporary files and the
// directories the write created.
func (t *txn) undo() error {
	var errs []error
	for i := len(t.undos) - 1; i >= 0; i-- {
		errs = append(errs, t.undos[i]())
	}
	for _, tmp := range t.temps {
		if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for i := len(t.dirs) - 1; i >= 0; i-- {
		errs = append(errs, os.Remove(t.dirs[i]))
	}
	return errors.Join(errs...)
}

// finish deletes the backups of a write that succeeded.
func (t *txn) finish() {
	for _, b := range t.backups {
		os.Remove(b)
	}
}

// writeTemp writes b to a new temporary file in dir, named after base.
func writeTemp(dir, base string, b []byte) (string, error) {
	f, err := os.CreateTemp(dir, ".irisgen-new-"+base+"-*")
	if err != nil {
		return "", err
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(f.Name(), 0o644)); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}
