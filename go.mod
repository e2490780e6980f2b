module github.com/irisgen/irisgen

go 1.26.8

require (
	github.com/dave/jennifer v1.7.1
	github.com/stretchr/testify v1.12.1
	go.yaml.in/yaml/v3 v3.0.6
)
