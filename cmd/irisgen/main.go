// Command irisgen generates HIP kernels and typed Go launch wrappers for
// multi-GPU collectives from YAML specs, checks that checked-in output is
// current, explains a collective's rules, compiles the kernels and starts
// multi-process runs. It is internal/commands.Main; run `irisgen help` for
// the commands and `irisgen <command> -h` for each command's flags and
// examples.
package main

import (
	"os"

	"github.com/irisgen/irisgen/internal/commands"
)

func main() { os.Exit(commands.Main(os.Args[1:], os.Stdout, os.Stderr)) }
