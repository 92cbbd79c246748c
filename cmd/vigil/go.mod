module github.com/vigil-dev/vigil/cmd/vigil

go 1.26.0
