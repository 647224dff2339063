package registrysync

import (
	"fmt"
	"os"

	"github.com/rs/zerolog"
)

// parentEnv makes the test binary the parent of a stdio child (TestStdioChildDiesWithKilledParent):
// it starts, through startChild, a shell that ignores SIGTERM and its stdin and writes its PID
// (then a newline) to the file the variable names, and waits to be killed.
const parentEnv = "MCPSTREAM_TEST_PARENT"

func serveParent(pidFile string) int {
	sc := ServerConfig{Name: "stubborn", Transport: TransportStdio, Command: "/bin/sh",
		Args: []string{"-c", `trap '' TERM; echo $$ > "$1.tmp" && mv "$1.tmp" "$1"; exec sleep 100000`, "sh", pidFile}}
	c, err := startChild(sc, newRedactor(sc), zerolog.Nop(), maxLineBytes, maxLineBytes, func(string, bool) {})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start child:", err)
		return 1
	}
	<-c.exited
	return 0
}
