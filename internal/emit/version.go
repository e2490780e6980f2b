package emit

// Version is irisgen's release, which generated Go code states in its
// version marker. It is a constant rather than the module version the
// build stamps, so that output generated from the same commit is the same
// byte for byte however irisgen was built; raise it with each release.
const Version = "v0.1.0"
