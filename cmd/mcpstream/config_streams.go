package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// streamsConfig is the streams section of the configuration file: how much of the results and
// audit streams JetStream keeps. Applied by `up` (and every role process) when it declares the
// streams; a value it does not give keeps the stream's current one (the default when the stream
// is created), see keepLimits.
type streamsConfig struct {
	ResultsMaxAge   string `yaml:"resultsMaxAge"`   // Go duration of at least 10m (subjects.DedupWindow); default 24h
	ResultsMaxBytes string `yaml:"resultsMaxBytes"` // size such as 10GiB; default unlimited
	AuditMaxAge     string `yaml:"auditMaxAge"`     // Go duration; default 168h (7 days)
	AuditMaxBytes   string `yaml:"auditMaxBytes"`   // size such as 50GiB; default unlimited
}

// resolveStreams validates the streams section into c.streams.
func (c *fileConfig) resolveStreams() error {
	if c.Streams == nil {
		return nil
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &configError{File: c.Path, Where: "streams", Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	age := func(field, v string, dst *time.Duration, least time.Duration, why string) {
		if v == "" {
			return
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < least {
			bad(field, "want a duration of at least %s%s, such as 24h", durationText(least), why)
			return
		}
		*dst = d
	}
	size := func(field, v string, dst *int64) {
		if !sizeSetting(v, dst) {
			bad(field, sizeWant)
		}
	}
	s := c.Streams
	// The results stream de-duplicates call ids over subjects.DedupWindow, which JetStream
	// refuses to be longer than its max age; and a call id sent again within that window is
	// answered from the results stream, so its answer must still be there.
	age("resultsMaxAge", s.ResultsMaxAge, &c.streams.ResultsMaxAge, subjects.DedupWindow, " (the call ids' de-duplication window)")
	size("resultsMaxBytes", s.ResultsMaxBytes, &c.streams.ResultsMaxBytes)
	age("auditMaxAge", s.AuditMaxAge, &c.streams.AuditMaxAge, time.Minute, "")
	size("auditMaxBytes", s.AuditMaxBytes, &c.streams.AuditMaxBytes)
	return errors.Join(errs...)
}

// streamOptions are the stream declarations' options of this configuration.
func (c *fileConfig) streamOptions(replicas int) subjects.StreamOptions {
	o := c.streams
	o.Replicas = replicas
	return o
}

// durationText writes d as a Go duration without trailing zero units (10m, 1h30m, 90s).
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// sizeWant says what a size setting of the configuration takes.
const sizeWant = "want a size of at least 1MiB, such as 10GiB"

// sizeSetting parses v, a size setting of the configuration ("" = not given: dst is left as
// it is), into dst; false when v is not a size of at least 1 MiB.
func sizeSetting(v string, dst *int64) bool {
	if v == "" {
		return true
	}
	n, err := parseSize(v)
	if err != nil || n < 1<<20 {
		return false
	}
	*dst = n
	return true
}
