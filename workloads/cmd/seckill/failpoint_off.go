//go:build !failpoints

package main

// failpoint is nil in normal builds: no failpoint code runs in production.
var failpoint func(string) error
