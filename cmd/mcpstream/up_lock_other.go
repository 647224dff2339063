//go:build !unix

package main

// lockDataDir does nothing where flock is unavailable.
func lockDataDir(string) (func(), error) { return func() {}, nil }
