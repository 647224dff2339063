package demoservers

import (
	"slices"
	"testing"
	"time"
)

type gotLogs struct {
	Entries []logEntry `json:"entries"`
}

type gotStats struct {
	Total  int          `json:"total"`
	Levels []levelStats `json:"levels"`
	Oldest int64        `json:"oldestTimestamp"`
	Newest int64        `json:"newestTimestamp"`
}

func TestGenerateLogsDeterministic(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	a := generateLogs(3000, 42, now)
	b := generateLogs(3000, 42, now)
	c := generateLogs(3000, 43, now)
	if !slices.Equal(a.entries, b.entries) {
		t.Error("same seed and time: entries differ")
	}
	if slices.Equal(a.entries, c.entries) {
		t.Error("different seeds: identical entries")
	}
	if got := len(a.entries); got != 3000 {
		t.Errorf("len = %d, want 3000", got)
	}
	for i, e := range a.entries {
		if e.Timestamp > now.UnixMilli() || e.Timestamp <= now.Add(-logWindow).UnixMilli() {
			t.Fatalf("entry %d timestamp %d outside (now-%v, now]", i, e.Timestamp, logWindow)
		}
		if i > 0 && e.Timestamp > a.entries[i-1].Timestamp {
			t.Fatalf("entries not newest first at %d", i)
		}
		if (e.Level == "error") != (e.StackTrace != "") {
			t.Fatalf("entry %d: level %s with stackTrace %q", i, e.Level, e.StackTrace)
		}
	}
}

func TestGetLogs(t *testing.T) {
	opts := testOptions(t)
	opts.Logs = 5000
	c := connect(t, "inprocess", "logging", opts)
	hourAgo := time.Now().Add(-time.Hour).UnixMilli()

	stats := callOK[gotStats](t, c, "getLogStats", map[string]any{})
	if stats.Total != 5000 {
		t.Fatalf("getLogStats total = %d, want 5000", stats.Total)
	}
	counts := map[string]levelStats{}
	sum := 0
	for _, l := range stats.Levels {
		counts[l.Level] = l
		sum += l.Count
	}
	if sum != stats.Total {
		t.Errorf("level counts sum to %d, want %d", sum, stats.Total)
	}

	for _, level := range []string{"error", "warn", "info"} {
		t.Run(level, func(t *testing.T) {
			got := callOK[gotLogs](t, c, "getLogs", map[string]any{"level": level, "since": hourAgo})
			if len(got.Entries) != counts[level].Count {
				t.Fatalf("getLogs(%s, last hour) = %d entries, want %d (all of them)", level, len(got.Entries), counts[level].Count)
			}
			messages := map[string]int{}
			for _, e := range got.Entries {
				if e.Level != level {
					t.Fatalf("entry of level %q in %s result", e.Level, level)
				}
				if e.Timestamp < hourAgo {
					t.Fatalf("entry at %d before since %d", e.Timestamp, hourAgo)
				}
				messages[e.Message]++
			}
			if len(messages) != counts[level].DistinctMessages {
				t.Errorf("distinct messages = %d, stats say %d", len(messages), counts[level].DistinctMessages)
			}
			// Many duplicates: far fewer distinct messages than entries.
			if len(messages) < 2 || len(messages)*10 > len(got.Entries) {
				t.Errorf("%d distinct messages in %d entries: want heavy duplication", len(messages), len(got.Entries))
			}
			if level == "error" && len(messages) > len(errorTemplates) {
				t.Errorf("%d distinct error messages, want at most %d", len(messages), len(errorTemplates))
			}
		})
	}

	t.Run("since filters", func(t *testing.T) {
		all := callOK[gotLogs](t, c, "getLogs", map[string]any{"level": "info", "since": hourAgo})
		mid := all.Entries[len(all.Entries)/2].Timestamp
		want := 0
		for _, e := range all.Entries {
			if e.Timestamp >= mid {
				want++
			}
		}
		got := callOK[gotLogs](t, c, "getLogs", map[string]any{"level": "info", "since": mid})
		if len(got.Entries) != want || want == len(all.Entries) {
			t.Errorf("since=%d: %d entries, want %d (of %d)", mid, len(got.Entries), want, len(all.Entries))
		}
		future := callOK[gotLogs](t, c, "getLogs", map[string]any{"level": "info", "since": time.Now().Add(time.Hour).UnixMilli()})
		if len(future.Entries) != 0 {
			t.Errorf("since in the future: %d entries, want 0", len(future.Entries))
		}
	})

	t.Run("limit", func(t *testing.T) {
		got := callOK[gotLogs](t, c, "getLogs", map[string]any{"level": "warn", "since": 0, "limit": 7})
		if len(got.Entries) != 7 {
			t.Errorf("limit 7: %d entries", len(got.Entries))
		}
	})

	t.Run("tailLogs is optional", func(t *testing.T) {
		if err := callErr(t, c, "tailLogs", map[string]any{}); err == nil {
			t.Errorf("tailLogs callable without control file")
		}
	})
}

func TestGetLogsInvalidArguments(t *testing.T) {
	c := connect(t, "inprocess", "logging", testOptions(t))
	for _, tc := range []struct {
		name string
		args map[string]any
	}{
		{"unknown level", map[string]any{"level": "debug", "since": 0}},
		{"missing since", map[string]any{"level": "error"}},
		{"since not a number", map[string]any{"level": "error", "since": "yesterday"}},
		{"limit zero", map[string]any{"level": "error", "since": 0, "limit": 0}},
		{"extra argument", map[string]any{"level": "error", "since": 0, "service": "api"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := callTool(t, c, "getLogs", tc.args)
			if !res.IsError {
				t.Errorf("getLogs(%v): want isError, got %s", tc.args, resultText(res))
			}
		})
	}
}
