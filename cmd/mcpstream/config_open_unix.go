//go:build unix

package main

import "syscall"

// openNonblock opens the configuration file without waiting: open(2) of a named pipe nobody
// writes to would block for good (and SIGTERM would not end it).
const openNonblock = syscall.O_NONBLOCK
