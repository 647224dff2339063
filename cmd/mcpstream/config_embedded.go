package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpstream/mcpstream/natsembed"
)

// embeddedNATSConfig is the embeddedNats section of the configuration file: the durability and
// the storage bounds of the NATS server `up` embeds (without --nats). Other processes, and `up`
// with --nats, do not use it: a server of one's own is configured in its own file (nats.conf).
type embeddedNATSConfig struct {
	// Sync is how often JetStream fsyncs its store: a Go duration (at least 100ms), or "always"
	// (after every write). Default: nats-server's 2m.
	Sync      string `yaml:"sync"`
	MaxStore  string `yaml:"maxStore"`  // JetStream file storage bound, such as 50GiB; default 75% of the free disk
	MaxMemory string `yaml:"maxMemory"` // JetStream memory storage bound, such as 1GiB; default 75% of the memory
}

// minSyncInterval bounds the fsync period from below: shorter, the server would fsync its whole
// store nearly all the time ("always" is the way to fsync every write).
const minSyncInterval = 100 * time.Millisecond

// resolveEmbeddedNATS validates the embeddedNats section into c.embedded.
func (c *fileConfig) resolveEmbeddedNATS() error {
	e := c.EmbeddedNATS
	if e == nil {
		return nil
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &configError{File: c.Path, Where: "embeddedNats", Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	switch s := strings.TrimSpace(e.Sync); {
	case s == "":
	case strings.EqualFold(s, "always"):
		c.embedded.SyncAlways = true
	default:
		d, err := time.ParseDuration(s)
		if err != nil || d < minSyncInterval || d > 24*time.Hour {
			bad("sync", "want \"always\" or a duration from %s to 24h, such as 1s", minSyncInterval)
			break
		}
		c.embedded.SyncInterval = d
	}
	size := func(field, v string, dst *int64) {
		if !sizeSetting(v, dst) {
			bad(field, sizeWant)
		}
	}
	size("maxStore", e.MaxStore, &c.embedded.MaxStore)
	size("maxMemory", e.MaxMemory, &c.embedded.MaxMemory)
	return errors.Join(errs...)
}

// embeddedNATS is the embedded server's configuration of this file, to be completed with the
// store directory and the listen address.
func (c *fileConfig) embeddedNATS() natsembed.Config { return c.embedded }

// syncDescription says when the embedded server fsyncs its store, for the start log.
func syncDescription(c natsembed.Config) string {
	switch {
	case c.SyncAlways:
		return "fsync after every write"
	case c.SyncInterval > 0:
		return "fsync every " + c.SyncInterval.String()
	}
	return "fsync every 2m0s (nats-server's default; see embeddedNats.sync)"
}
