package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procEntry is a live process as /proc tells it: its pid, its parent's and its arguments.
type procEntry struct {
	pid, ppid int
	args      []string
}

// processes lists the processes /proc shows that are not zombies (none without a /proc).
func processes() []procEntry {
	var out []procEntry
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 || fields[0] == "Z" {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		cmdline, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		out = append(out, procEntry{pid: pid, ppid: ppid, args: strings.Split(string(cmdline), "\x00")})
	}
	return out
}
