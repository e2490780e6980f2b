module example.com/stencil

go 1.26.8

require (
	github.com/irisgen/irisgen v0.0.0
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/dave/jennifer v1.7.1 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)

replace github.com/irisgen/irisgen => ../..

tool github.com/irisgen/irisgen/cmd/irisgen
