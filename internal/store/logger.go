package store

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/hetsched/hetsched/internal/errs"
)

// failure is the store's sticky failure: set once, by the first write that
// failed or by Pebble's Logger.Fatalf, never cleared. Every Commit after it
// fails; reads go on.
type failure struct {
	once   sync.Once
	err    *errs.Error
	ch     chan struct{} // closed when err is set
	log    *slog.Logger
	onFail func()
}

func newFailure(log *slog.Logger) *failure {
	return &failure{ch: make(chan struct{}), log: log}
}

// set records cause as the failure, once.
func (f *failure) set(cause error) {
	f.once.Do(func() {
		code := errs.Unavailable
		if isNoSpace(cause) {
			code = errs.InsufficientStorage
		}
		f.err = &errs.Error{Code: code, Message: fmt.Sprintf(
			"the store failed: %v; nothing is written any more (reads still work): restart once the disk is fixed", cause), Err: cause}
		f.log.Error("store: the store failed: writes are refused until a restart", "cause", cause.Error())
		close(f.ch)
		if f.onFail != nil {
			f.onFail()
		}
	})
}

// get returns the failure, or nil.
func (f *failure) get() error {
	select {
	case <-f.ch:
		return f.err
	default:
		return nil
	}
}

func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// park blocks the calling goroutine forever. It is where a Pebble goroutine
// goes once the store failed and continuing would be unsafe (see
// pebbleLogger.Fatalf and guardFS). Its caller is never told anything: a
// Commit waiting on it returns when the failure is set (Disk.Commit).
func park() { select {} }

// pebbleLogger sends Pebble's messages to slog, at most one per message
// kind per logEvery (with a count of those suppressed), so that a retry
// loop on a full disk cannot flood the log.
type pebbleLogger struct {
	l    *slog.Logger
	lim  *limiter
	fail *failure
}

func (p pebbleLogger) Infof(format string, args ...any) {
	if msg, ok := p.lim.allow(format, args); ok {
		p.l.Debug(msg, "component", "pebble")
	}
}

// warnf is for events worth an operator's attention that are not errors.
func (p pebbleLogger) warnf(format string, args ...any) {
	if msg, ok := p.lim.allow(format, args); ok {
		p.l.Warn(msg, "component", "pebble")
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	if msg, ok := p.lim.allow(format, args); ok {
		p.l.Error(msg, "component", "pebble")
	}
}

// Fatalf is Pebble saying the store is unusable. Pebble does not expect it
// to return: of its call sites in v2.1.7, DB.Apply (db.go: "fatal commit
// error") returns nil right after it, which would acknowledge a batch that
// is not durable, and versionSet.UpdateVersionLocked (a failed MANIFEST
// write) returns with reference counts it did not unwind and a MANIFEST
// that may end in half a record. Fatalf therefore records the failure and
// parks the goroutine: never returning is what Pebble's own default
// (os.Exit) gives those call sites, without taking reads, /healthz and
// heartbeats down with the process. The goroutine may hold DB.mu (the
// MANIFEST site) or the commit pipeline's mutex; Disk.Close then gives up
// after a bounded wait. The I/O errors that would reach these sites in
// practice are parked earlier, in guardFS, where no Pebble lock is held.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "component", "pebble", "fatal", true)
	p.fail.set(errors.New("pebble: " + msg))
	park()
}

// logEvery is the window within which one kind of message is logged once.
const logEvery = 10 * time.Second

// maxLimiterKeys bounds the limiter's memory; when full it starts over.
const maxLimiterKeys = 256

// limiter lets one message per kind through per logEvery. A message's kind
// is its format plus its text with digits removed (job numbers, file
// numbers and sizes change between otherwise identical messages).
type limiter struct {
	mu   sync.Mutex
	seen map[string]*limit
	now  func() time.Time
}

type limit struct {
	last       time.Time
	suppressed int
}

func newLimiter() *limiter { return &limiter{seen: map[string]*limit{}, now: time.Now} }

// allow formats the message and says whether to log it now; a message
// logged after others of its kind were suppressed says how many.
func (l *limiter) allow(format string, args []any) (string, bool) {
	msg := fmt.Sprintf(format, args...)
	key := format + "\x00" + strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}, msg[:min(len(msg), 200)])
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.seen[key]
	if e == nil {
		if len(l.seen) >= maxLimiterKeys {
			clear(l.seen)
		}
		l.seen[key] = &limit{last: now}
		return msg, true
	}
	if now.Sub(e.last) < logEvery {
		e.suppressed++
		return "", false
	}
	if e.suppressed > 0 {
		msg = fmt.Sprintf("%s (%d similar messages suppressed in the last %s)", msg, e.suppressed, now.Sub(e.last).Round(time.Second))
	}
	e.last, e.suppressed = now, 0
	return msg, true
}

// eventListener routes the Pebble events that matter here: background
// errors (logged, rate-limited; free space re-read), data corruption (the
// store fails: Pebble's default would exit the process), slow disks and
// write stalls (commits wait for flushes, e.g. while a full disk fails
// them).
func eventListener(lg pebbleLogger, space func()) *pebble.EventListener {
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			if space != nil {
				space()
			}
			lg.Errorf("background error: %s", err)
		},
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			lg.Errorf("data corruption: %s", info)
			lg.fail.set(fmt.Errorf("corrupt data in %s: %v: run `hetsched store check`", info.Path, info.Details))
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			lg.warnf("disk slow: %s", info)
		},
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			lg.warnf("write stall: commits wait for flushes (%s)", info.Reason)
		},
		WriteStallEnd: func() {
			lg.warnf("write stall ended")
		},
	}
}
