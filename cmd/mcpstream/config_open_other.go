//go:build !unix

package main

const openNonblock = 0
