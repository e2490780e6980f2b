module github.com/irisgen/irisgen

go 1.26.8
