package demoservers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// maxControlFile bounds how much of a control file is read.
const maxControlFile = 1 << 20

// Control is the content of a control file.
type Control struct {
	// Hide removes tools (default or extra) from the advertised list.
	Hide []string `json:"hide,omitempty"`
	// Add advertises optional extra tools (see ExtraTools).
	Add []string `json:"add,omitempty"`
}

// ParseControl decodes a control file strictly: unknown fields, trailing data
// and an empty document are errors.
func ParseControl(data []byte) (Control, error) {
	var c Control
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return c, errors.New("empty control file")
	}
	if trimmed[0] != '{' { // null would decode as an empty object
		return c, errors.New("decode control file: not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Control{}, fmt.Errorf("decode control file: %w", err)
	}
	// Not dec.More: it reports no more data before a stray '}' or ']'.
	if _, err := dec.Token(); err != io.EOF {
		return Control{}, errors.New("decode control file: trailing data after the JSON object")
	}
	return c, nil
}

// readControl returns the control file content, or nil and no error when the
// file does not exist.
func readControl(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxControlFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxControlFile {
		return nil, fmt.Errorf("control file larger than %d bytes", maxControlFile)
	}
	return data, nil
}

func (d *demo) watchControl(ctx context.Context) {
	t := time.NewTicker(d.opts.controlInterval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.pollControl()
		}
	}
}

// pollControl reads the control file once and applies it if it changed since
// the last poll. A missing file means the defaults; a malformed file is logged
// once and ignored (the current tools stay).
func (d *demo) pollControl() {
	if d.opts.ControlFile == "" {
		return
	}
	data, err := readControl(d.opts.ControlFile)
	key := "missing"
	switch {
	case err != nil:
		key = "error:" + err.Error()
	case data != nil:
		key = "data:" + string(data)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	if key == d.lastKey {
		return
	}
	d.lastKey = key
	if err != nil {
		d.log.Printf("control file %s: %v (ignored, tools unchanged)", d.opts.ControlFile, err)
		return
	}
	var c Control
	if data != nil {
		c, err = ParseControl(data)
		if err != nil {
			d.log.Printf("control file %s: %v (ignored, tools unchanged)", d.opts.ControlFile, err)
			return
		}
	}
	d.applyLocked(c)
}

// applyLocked registers exactly the tools c asks for. d.mu must be held.
func (d *demo) applyLocked(c Control) {
	desired := make(map[string]server.ServerTool, len(d.base)+len(c.Add))
	for _, t := range d.base {
		desired[t.Tool.Name] = t
	}
	for _, name := range c.Add {
		t, ok := d.extras[name]
		if !ok {
			if _, isBase := desired[name]; !isBase {
				d.log.Printf("control file: %q is not an optional tool of %s (ignored)", name, d.name)
			}
			continue
		}
		desired[name] = t
	}
	for _, name := range c.Hide {
		delete(desired, name)
	}

	var remove []string
	for name := range d.active {
		if _, ok := desired[name]; !ok {
			remove = append(remove, name)
		}
	}
	var add []server.ServerTool
	for name, t := range desired {
		if !d.active[name] {
			add = append(add, t)
		}
	}
	slices.Sort(remove)
	slices.SortFunc(add, func(a, b server.ServerTool) int {
		switch {
		case a.Tool.Name < b.Tool.Name:
			return -1
		case a.Tool.Name > b.Tool.Name:
			return 1
		}
		return 0
	})

	if len(remove) > 0 {
		d.srv.DeleteTools(remove...)
		for _, name := range remove {
			delete(d.active, name)
		}
	}
	if len(add) > 0 {
		d.srv.AddTools(add...)
		for _, t := range add {
			d.active[t.Tool.Name] = true
		}
	}
	if len(remove) > 0 || len(add) > 0 {
		d.log.Printf("control file applied: removed %v, added %v", remove, toolNames(add))
	}
}

func toolNames(tools []server.ServerTool) []string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Tool.Name
	}
	return names
}
