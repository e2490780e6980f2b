package commands

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/irisgen/irisgen/internal/cli"
	"github.com/irisgen/irisgen/internal/config"
	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/driver"
)

// sourceFlags choose the config and override it: the flags generate,
// check, validate, explain and kernels share.
type sourceFlags struct {
	fs                                 *flag.FlagSet
	config, specs, templates, out, pkg string
	errorFormat                        string
	// output: the command generates, compares or builds the output.
	output bool
}

// addSourceFlags adds -config, with specs -specs and -templates, and with
// out -out and -package.
func addSourceFlags(fs *flag.FlagSet, specs, out bool) *sourceFlags {
	s := &sourceFlags{fs: fs, output: out}
	fs.StringVar(&s.config, "config", "", "config file (default: "+config.FileName+" in the working directory or above it, up to the module root)")
	fs.StringVar(&s.errorFormat, "error-format", string(diag.FormatText), "how errors in specs, templates and the config are printed on stderr: text (file:line:col: error: message) or json (one object a line: code, file, line, column, end_line, end_column, severity, message, notes)")
	if specs {
		fs.StringVar(&s.specs, "specs", "", "directory of collective specs (*.yaml); overrides the config's specs (\"\": the catalogue built into irisgen)")
		fs.StringVar(&s.templates, "templates", "", "directory of HIP templates (*.hip.tmpl); overrides the config's templates (\"\": the templates built into irisgen)")
	}
	if out {
		fs.StringVar(&s.out, "out", "", "output root, overriding the config's out (default generated): kernels go to OUT/hip, Go wrappers to OUT/PACKAGE")
		fs.StringVar(&s.pkg, "package", "", "name of the generated Go package and of its directory under OUT, overriding the config's package (default collectives)")
	}
	return s
}

// resolve loads the config and applies the flags the user set.
func (s *sourceFlags) resolve(env *cli.Env) (*config.Config, error) {
	if _, err := diag.ParseFormat(s.errorFormat); err != nil {
		return nil, cli.UsageErr("-error-format: %v", err)
	}
	set := cli.Set(s.fs)
	given := func(name string, v *string) *string {
		if set[name] {
			return v
		}
		return nil
	}
	o := config.Overrides{Specs: given("specs", &s.specs), Templates: given("templates", &s.templates),
		Out: given("out", &s.out), Package: given("package", &s.pkg), Output: s.output}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	c, err := config.Resolve(s.config, wd, o)
	var fe *config.FlagError
	if errors.As(err, &fe) {
		return nil, cli.UsageErr("%v", fe)
	}
	if err != nil {
		return nil, s.report(env, err)
	}
	return c, nil
}

// project resolves the config and makes its driver project.
func (s *sourceFlags) project(env *cli.Env) (*config.Config, *driver.Project, error) {
	c, err := s.resolve(env)
	if err != nil {
		return nil, nil, err
	}
	p, err := driver.New(c)
	if err != nil {
		return nil, nil, cli.Fail(err)
	}
	return c, p, nil
}

// report prints a failure: positioned errors in the -error-format (text:
// one a line with a count; json: one object a line), anything else as is.
func (s *sourceFlags) report(env *cli.Env, err error) error {
	var l diag.List
	if errors.As(err, &l) {
		f, _ := diag.ParseFormat(s.errorFormat) // checked by resolve
		if err := diag.Write(env.Stderr, f, l); err != nil {
			return cli.Fail(err)
		}
		return cli.Silent
	}
	return cli.Fail(err)
}

// shown names a path for messages: relative to the working directory, or
// absolute when that is shorter.
func shown(p string) string {
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, p); err == nil && (len(r) <= len(p) || !filepath.IsAbs(p)) {
			return r
		}
	}
	return p
}

func init() {
	register(&cli.Command{
		Name:    "generate",
		Summary: "generate HIP kernels and Go wrappers from the specs",
		Usage:   "generate [-config FILE] [-specs DIR] [-templates DIR] [-out DIR] [-package NAME] [-error-format text|json]",
		Help: `
Generate compiles every spec, renders the HIP kernels into OUT/hip/<collective>.hip
and the typed Go wrappers into OUT/PACKAGE/, and prints what changed. It reads
irisgen.yaml (found in the working directory or above it, up to the module
root), so it gives the same output from any directory of the repository;
without one it uses the catalogue built into irisgen and writes to ./generated.

It only ever overwrites or removes files that carry irisgen's "Code generated"
header: a file of yours where an output goes is an error naming it, and
generated files no longer produced are removed (under go generate, a Go file
is emptied out of every build instead, since go generate has listed it and
would fail to read it; the next generate removes it). Writes are atomic:
every file is written beside its target first and renamed into place, and on
any failure the output is left as it was.

Examples:
  irisgen generate
  irisgen generate -specs specs -out internal/coll -package coll
  go generate ./...        (runs the repository's //go:generate line)`,
		Run: runGenerate,
	})
	register(&cli.Command{
		Name:    "check",
		Summary: "fail with a diff when the generated files are stale",
		Usage:   "check [-config FILE] [-specs DIR] [-templates DIR] [-out DIR] [-package NAME] [-error-format text|json]",
		Help: `
Check regenerates everything in memory and compares it with OUT. Every file
that differs, is missing or is left over is printed as a unified diff, and the
exit code is 1 when anything is stale. Compiled kernels (OUT/PACKAGE/kernels)
are not generated files and are never reported. Use it in CI and before
committing.

Examples:
  irisgen check
  irisgen check -config tests/downstream/irisgen.yaml`,
		Run: runCheck,
	})
}

// changes parses the flags of generate or check, generates every output in
// memory and sets it against the output directory.
func changes(env *cli.Env, name string, args []string) (*driver.Project, []driver.Change, error) {
	c := program.Find(name)
	fs := env.Flags(c)
	src := addSourceFlags(fs, true, true)
	if err := env.Parse(c, fs, args); err != nil {
		return nil, nil, err
	}
	if fs.NArg() > 0 {
		return nil, nil, cli.UsageErr("unexpected arguments %q", fs.Args())
	}
	_, p, err := src.project(env)
	if err != nil {
		return nil, nil, err
	}
	files, _, err := p.Generate()
	if err != nil {
		return nil, nil, src.report(env, err)
	}
	chs, err := p.Compare(files)
	if err != nil {
		return nil, nil, cli.Fail(err)
	}
	return p, chs, nil
}

func runGenerate(env *cli.Env, args []string) error {
	p, chs, err := changes(env, "generate", args)
	if err != nil {
		return err
	}
	if underGoGenerate() {
		chs = driver.KeepListed(chs)
	}
	if err := p.Write(chs); err != nil {
		var fe *driver.ForeignError
		if errors.As(err, &fe) {
			return cli.Fail(errors.New(fe.Message(func(k string) string { return shown(filepath.Join(p.Out, filepath.FromSlash(k))) })))
		}
		return cli.Fail(err)
	}
	files, count := 0, map[driver.Kind]int{}
	for _, ch := range chs {
		count[ch.Kind]++
		path := shown(filepath.Join(p.Out, filepath.FromSlash(ch.Path)))
		switch ch.Kind {
		case driver.Create:
			fmt.Fprintf(env.Stdout, "created %s\n", path)
		case driver.Update:
			fmt.Fprintf(env.Stdout, "updated %s\n", path)
		case driver.Remove:
			fmt.Fprintf(env.Stdout, "removed %s (stale)\n", path)
		case driver.Empty:
			fmt.Fprintf(env.Stdout, "emptied %s (stale; `go generate` had listed it, so it stays, out of every build, until the next generate removes it)\n", path)
		}
		if ch.Kind != driver.Remove && ch.Kind != driver.Empty {
			files++
		}
	}
	fmt.Fprintf(env.Stdout, "%s: %d files, %d created, %d updated, %d removed, %d unchanged\n",
		shown(p.Out), files, count[driver.Create], count[driver.Update], count[driver.Remove]+count[driver.Empty], count[driver.Unchanged])
	return nil
}

// underGoGenerate reports whether `go generate` runs this irisgen (it sets
// GOFILE and GOPACKAGE for the generators it runs).
func underGoGenerate() bool { return os.Getenv("GOFILE") != "" && os.Getenv("GOPACKAGE") != "" }

func runCheck(env *cli.Env, args []string) error {
	p, chs, err := changes(env, "check", args)
	if err != nil {
		return err
	}
	name := func(k string) string { return filepath.ToSlash(shown(filepath.Join(p.Out, filepath.FromSlash(k)))) }
	stale := driver.Stale(chs)
	for _, ch := range stale {
		fmt.Fprint(env.Stdout, driver.Diff(ch, name))
	}
	if len(stale) > 0 {
		fmt.Fprintf(env.Stderr, "%s is stale: %d file%s out of date:\n", shown(p.Out), len(stale), cli.Plural(len(stale)))
		for _, ch := range stale {
			what := ch.Kind.String()
			if ch.Input {
				what = "an input of this run: " + ch.Why
			}
			fmt.Fprintf(env.Stderr, "  %s (%s)\n", name(ch.Path), what)
		}
		fmt.Fprintln(env.Stderr, "fix: run `go generate ./...` or `irisgen generate` (with the same flags) and commit the result")
		return cli.Silent
	}
	fmt.Fprintf(env.Stdout, "%s is up to date (%d files)\n", shown(p.Out), len(chs))
	return nil
}
