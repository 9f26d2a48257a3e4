package store_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hetsched/hetsched/internal/store"
)

// commitN commits n records, one per commit, keys prefix-00000..., values
// of size bytes that name their key, and returns the keys in commit order.
func commitN(t *testing.T, s store.Store, prefix string, n, size int) []string {
	t.Helper()
	keys := make([]string, n)
	for i := range n {
		keys[i] = fmt.Sprintf("%s-%05d", prefix, i)
		if err := s.Commit(context.Background(), []store.Record{{Kind: "task", Key: keys[i], Value: value(keys[i], size)}}); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	return keys
}

// value is size bytes starting with the key, padded with a pattern.
func value(key string, size int) []byte {
	v := make([]byte, max(size, len(key)))
	copy(v, key)
	for i := len(key); i < len(v); i++ {
		v[i] = byte('a' + i%26)
	}
	return v
}

// loadTasks returns every task key and checks each value names its key.
func loadTasks(t *testing.T, s store.Store) map[string]bool {
	t.Helper()
	found := map[string]bool{}
	if err := s.Load(context.Background(), "task", func(k string, v []byte) error {
		if !strings.HasPrefix(string(v), k) {
			t.Errorf("%s has a value not naming it: %.40q", k, v)
		}
		found[k] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return found
}

// checkPrefix checks that found holds exactly keys[:n].
func checkPrefix(t *testing.T, found map[string]bool, keys []string, n int) {
	t.Helper()
	if len(found) != n {
		t.Errorf("%d records present, want %d", len(found), n)
	}
	for i, k := range keys {
		if found[k] != (i < n) {
			t.Errorf("record %d (%s): present %v, want %v", i, k, found[k], i < n)
			return
		}
	}
}

// logs returns the data dir's write-ahead logs, oldest first.
// dirState is every file's name and content, to prove nothing changed.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		st[e.Name()] = string(b)
	}
	return st
}

// copyDir copies the files of a data dir (not its LOCK) to a new one.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	for name, b := range dirState(t, dir) {
		if name == "LOCK" {
			continue
		}
		if err := os.WriteFile(filepath.Join(to, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// logRecorder is a slog handler that keeps every record.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.recs = append(l.recs, r)
	l.mu.Unlock()
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// find returns the records at level whose message contains substr.
func (l *logRecorder) find(level slog.Level, substr string) []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []slog.Record
	for _, r := range l.recs {
		if r.Level == level && strings.Contains(r.Message, substr) {
			out = append(out, r)
		}
	}
	return out
}
