package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// followPoll is how often a following log reader at EOF looks for more.
const followPoll = 50 * time.Millisecond

// OpenLog opens a task's log: stream "stdout", "stderr" or "" for the
// combined output.log, of its latest attempt when attempt is negative, else of attempt. With
// follow, the reader blocks at EOF waiting for more data until the attempt
// has a result.json and all data is read (then io.EOF), or ctx ends (then
// ctx's error); without follow it reads what is there now. ErrNoLog when
// no such task attempt directory exists. The reader starts no goroutine;
// Close may be called while a Read waits, which then returns
// os.ErrClosed.
func (x *Executor) OpenLog(ctx context.Context, task string, attempt int, stream string, follow bool) (io.ReadCloser, error) {
	var name string
	switch stream {
	case "stdout":
		name = stdoutLog
	case "stderr":
		name = stderrLog
	case "":
		name = outputLog
	default:
		return nil, fmt.Errorf("executor: unknown log stream %q (want stdout, stderr or \"\")", stream)
	}
	if !validTaskID(task) {
		return nil, fmt.Errorf("%w: invalid task id %q", ErrNoLog, task)
	}
	if attempt < 0 {
		n, ok, err := x.latestAttempt(task)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%w: task %s", ErrNoLog, task)
		}
		attempt = n
	}
	dir := x.dir(task, attempt)
	if !exists(dir) {
		return nil, fmt.Errorf("%w: %s", ErrNoLog, attemptName(task, attempt))
	}
	r := &logReader{ctx: ctx, dir: dir, path: filepath.Join(dir, name), follow: follow, closed: make(chan struct{})}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

// latestAttempt is the highest attempt number of task with a directory.
func (x *Executor) latestAttempt(task string) (int, bool, error) {
	entries, err := os.ReadDir(x.tasks)
	if err != nil {
		return 0, false, fmt.Errorf("executor: %w", err)
	}
	best, found := 0, false
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), task+"_") {
			continue
		}
		t, n, ok := parseAttemptName(e.Name())
		if ok && t == task && (!found || n > best) {
			best, found = n, true
		}
	}
	return best, found, nil
}

// logReader reads a log file, following it while the attempt runs.
type logReader struct {
	ctx    context.Context
	dir    string
	path   string
	follow bool

	mu       sync.Mutex // guards f against Close
	f        *os.File   // nil until the file exists
	finished bool       // result.json was seen; the next EOF is the end
	closed   chan struct{}
	once     sync.Once
}

// open opens the file if it exists; a missing file reads as empty.
func (r *logReader) open() error {
	f, err := os.Open(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("executor: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.closed:
		_ = f.Close()
		return os.ErrClosed
	default:
	}
	r.f = f
	return nil
}

func (r *logReader) file() *os.File {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f
}

func (r *logReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		select {
		case <-r.closed:
			return 0, os.ErrClosed
		default:
		}
		if f := r.file(); f != nil {
			n, err := f.Read(p)
			if n > 0 {
				return n, nil
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return 0, err
			}
		} else if err := r.open(); err != nil {
			return 0, err
		}
		// At EOF (or no file yet).
		if !r.follow || r.finished {
			return 0, io.EOF
		}
		// The shim writes result.json after the last log byte, so one
		// more read after seeing it gets everything.
		if exists(filepath.Join(r.dir, resultFile)) {
			r.finished = true
			continue
		}
		t := time.NewTimer(followPoll)
		select {
		case <-r.ctx.Done():
			t.Stop()
			return 0, r.ctx.Err()
		case <-r.closed:
			t.Stop()
			return 0, os.ErrClosed
		case <-t.C:
		}
	}
}

func (r *logReader) Close() error {
	r.once.Do(func() {
		close(r.closed)
		r.mu.Lock()
		if r.f != nil {
			_ = r.f.Close()
		}
		r.mu.Unlock()
	})
	return nil
}
