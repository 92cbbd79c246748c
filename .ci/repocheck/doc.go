// Package repocheck holds tests that keep the repository's lists true to its tree: the CI
// stages' expected tests (.ci/expected) name tests that exist, the fuzz stage lists every fuzz
// target, and the README and docs name only make targets, environment variables and paths
// that exist. It has no code of its own; `make test` runs its tests.
package repocheck
