// Package irisgen holds the catalogue that ships inside the irisgen binary:
// the collective specs and the HIP templates, so `irisgen generate` runs with
// no arguments and downstream repos need no copy of them.
package irisgen

import "embed"

// Specs holds specs/*.yaml.
//
//go:embed specs
var Specs embed.FS

// Templates holds templates/*.hip.tmpl.
//
//go:embed templates
var Templates embed.FS

// Include holds runtime/include, the portable device header the generated
// HIP includes; `irisgen kernels` hands it to the compiler.
//
//go:embed runtime/include
var Include embed.FS
