package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// streamsConfig is the streams section of the configuration file: how much of the results and
// audit streams JetStream keeps. Applied by `up` (and every role process) when it declares the
// streams; a value it does not give keeps the stream's current one (the default when the stream
// is created), see keepLimits.
type streamsConfig struct {
	ResultsMaxAge   string `yaml:"resultsMaxAge"`   // Go duration; default 24h
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
	age := func(field, v string, dst *time.Duration) {
		if v == "" {
			return
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute {
			bad(field, "want a duration of at least 1m, such as 24h")
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
	age("resultsMaxAge", s.ResultsMaxAge, &c.streams.ResultsMaxAge)
	size("resultsMaxBytes", s.ResultsMaxBytes, &c.streams.ResultsMaxBytes)
	age("auditMaxAge", s.AuditMaxAge, &c.streams.AuditMaxAge)
	size("auditMaxBytes", s.AuditMaxBytes, &c.streams.AuditMaxBytes)
	return errors.Join(errs...)
}

// streamOptions are the stream declarations' options of this configuration.
func (c *fileConfig) streamOptions(replicas int) subjects.StreamOptions {
	o := c.streams
	o.Replicas = replicas
	return o
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
