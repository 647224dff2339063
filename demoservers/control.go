package demoservers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
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
	seen := d.lastKey != ""
	d.lastKey = key
	if err != nil {
		d.log.Printf("control file %s: %v (ignored, tools unchanged)", d.opts.ControlFile, err)
		return
	}
	var c Control
	if data == nil && seen {
		d.log.Printf("control file %s not found: default tools", d.opts.ControlFile)
	}
	if data != nil {
		c, err = ParseControl(data)
		if err != nil {
			d.log.Printf("control file %s: %v (ignored, tools unchanged)", d.opts.ControlFile, err)
			return
		}
	}
	d.applyLocked(c)
}

// applyLocked registers exactly the tools c asks for, in one step so that
// connected clients get a single notifications/tools/list_changed per change.
// Names that are not tools of the server are logged and ignored. d.mu must
// be held.
func (d *demo) applyLocked(c Control) {
	desired := make(map[string]server.ServerTool, len(d.base)+len(c.Add))
	for _, t := range d.base {
		desired[t.Tool.Name] = t
	}
	for _, name := range c.Add {
		t, ok := d.extras[name]
		if !ok {
			if _, isBase := desired[name]; !isBase {
				d.log.Printf("control file %s: %q is not an optional tool of %s (ignored; optional: %s)",
					d.opts.ControlFile, name, d.name, strings.Join(slices.Sorted(maps.Keys(d.extras)), ", "))
			}
			continue
		}
		desired[name] = t
	}
	for _, name := range c.Hide {
		if _, isExtra := d.extras[name]; !isExtra && !slices.ContainsFunc(d.base, func(t server.ServerTool) bool { return t.Tool.Name == name }) {
			d.log.Printf("control file %s: %q is not a tool of %s (ignored; tools: %s)",
				d.opts.ControlFile, name, d.name, strings.Join(d.allToolNames(), ", "))
		}
		delete(desired, name)
	}

	var removed, added []string
	for name := range d.active {
		if _, ok := desired[name]; !ok {
			removed = append(removed, name)
		}
	}
	for name := range desired {
		if !d.active[name] {
			added = append(added, name)
		}
	}
	if len(removed) == 0 && len(added) == 0 {
		return
	}
	slices.Sort(removed)
	slices.Sort(added)
	tools := make([]server.ServerTool, 0, len(desired))
	d.active = make(map[string]bool, len(desired))
	for name, t := range desired {
		tools = append(tools, t)
		d.active[name] = true
	}
	// SetTools sends one list_changed; DeleteTools then AddTools would send two.
	d.srv.SetTools(tools...)
	d.log.Printf("control file applied: removed %v, added %v", removed, added)
}

// allToolNames returns the names of the default and optional tools, sorted.
func (d *demo) allToolNames() []string {
	names := slices.Collect(maps.Keys(d.extras))
	for _, t := range d.base {
		names = append(names, t.Tool.Name)
	}
	slices.Sort(names)
	return names
}

func toolNames(tools []server.ServerTool) []string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Tool.Name
	}
	return names
}
