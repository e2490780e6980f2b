package irisgen

// One go:generate line for the repository: irisgen reads irisgen.yaml, so
// `go generate ./...` and `irisgen check` agree from any directory.
//
//go:generate go run ./cmd/irisgen generate
