package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/irisgen/irisgen/internal/cli"
)

// gpuProgram is the sibling program that holds the commands that run on
// GPUs (cmd/irisgen-gpu): the generator links neither the GPU platform nor
// the generated package, so a broken generated package never breaks the
// command that regenerates it.
const gpuProgram = "irisgen-gpu"

func init() {
	for _, c := range []struct{ name, summary, usage string }{
		{"bench", "time the collectives on this machine's GPUs beside NCCL (runs irisgen-gpu)", "bench [flags]   (see irisgen-gpu bench -h)"},
		{"probe", "prove graph capture of every variant and mode on the GPUs (runs irisgen-gpu)", "probe [flags]   (see irisgen-gpu probe -h)"},
	} {
		name := c.name
		register(&cli.Command{
			Name: name, Summary: c.summary, Usage: c.usage,
			Help: fmt.Sprintf(`
%[1]s runs on GPUs, so it lives in %[2]s, irisgen's GPU program, which
irisgen runs with the same arguments: "irisgen %[1]s -h" shows its flags when
%[2]s is installed. irisgen looks for %[2]s beside its own executable, then on
PATH. Build it with "make gpu-build" (build/%[2]s, beside build/irisgen) or
"go install github.com/irisgen/irisgen/cmd/%[2]s".`, name, gpuProgram),
			Run: func(env *cli.Env, args []string) error { return runGPU(env, name, args) },
		})
	}
}

// findGPUProgram looks for irisgen-gpu beside this executable, then on PATH.
func findGPUProgram() (string, error) {
	var looked []string
	if exe, err := os.Executable(); err == nil {
		if exe, err := filepath.EvalSymlinks(exe); err == nil {
			p := filepath.Join(filepath.Dir(exe), gpuProgram)
			if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				return p, nil
			}
			looked = append(looked, p)
		}
	}
	if p, err := exec.LookPath(gpuProgram); err == nil {
		return p, nil
	}
	looked = append(looked, "PATH")
	return "", fmt.Errorf("%s is not installed (looked in %v): build it with `make gpu-build` (build/%s, beside build/irisgen) "+
		"or `go install github.com/irisgen/irisgen/cmd/%s`", gpuProgram, looked, gpuProgram, gpuProgram)
}

// runGPU runs `irisgen-gpu name args...` with this process's standard
// streams and exit code.
func runGPU(env *cli.Env, name string, args []string) error {
	p, err := findGPUProgram()
	if err != nil {
		return cli.Fail(fmt.Errorf("irisgen %s runs on GPUs, through %w", name, err))
	}
	cmd := exec.Command(p, append([]string{name}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, env.Stdout, env.Stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode()
		if code < 1 {
			code = 1 // killed by a signal
		}
		return &cli.ExitError{Code: code} // it printed its own errors
	}
	if err != nil {
		return cli.Fail(err)
	}
	return nil
}
