module github.com/vigil-dev/vigil/services/reservations

go 1.26.0
