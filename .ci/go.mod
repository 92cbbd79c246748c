module github.com/vigil-dev/vigil/ci

go 1.26.0
