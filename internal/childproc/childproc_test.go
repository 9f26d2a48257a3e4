package childproc

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestReadMemoryOfSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process memory is read from Linux's /proc")
	}
	m, err := ReadMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.Peak < m.RSS {
		t.Fatalf("%+v", m)
	}
}

// TestStartReportsAnEarlyExit: a child that exits before printing a URL is
// an error that carries its stderr.
func TestStartReportsAnEarlyExit(t *testing.T) {
	_, err := Start("/bin/sh", 10*time.Second, "-c", "echo broken >&2; exit 3")
	if err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("got %v", err)
	}
	c, err := Start("/bin/sh", 10*time.Second, "-c", "echo 'up at http://127.0.0.1:9 now'; exec sleep 30")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill()
	if c.URL != "http://127.0.0.1:9" || c.Pid() <= 0 {
		t.Fatalf("url %q pid %d", c.URL, c.Pid())
	}
}

// TestFirstURL: the server's first line names http:// or, over TLS,
// https://; an agent's names its server after its own text.
func TestFirstURL(t *testing.T) {
	for line, want := range map[string]string{
		"hetsched server: http://127.0.0.1:7070 (policy p)":  "http://127.0.0.1:7070",
		"hetsched server: https://127.0.0.1:7070 (policy p)": "https://127.0.0.1:7070",
		"a https://x:1 then http://y:2":                      "https://x:1",
		"a http://y:2 then https://x:1":                      "http://y:2",
		"no url here":                                        "",
	} {
		if got, ok := firstURL(line); got != want || ok != (want != "") {
			t.Errorf("%q: %q %v, want %q", line, got, ok, want)
		}
	}
}

// TestReadWriteBytesOfSelf: writing and syncing a file moves this
// process's write_bytes by at least the file's size.
func TestReadWriteBytesOfSelf(t *testing.T) {
	before, err := ReadWriteBytes(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// In the package directory, not $TMPDIR, which may be a tmpfs that
	// never reaches the block layer.
	f, err := os.CreateTemp(".", "writebytes-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	after, err := ReadWriteBytes(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 1<<20 {
		t.Fatalf("write_bytes moved by %d after writing and syncing 1 MiB", after-before)
	}
}

// TestReadSyscallsOfSelf: writing to a pipe n times moves this process's
// write count by at least n, and reading it back its read count.
func TestReadSyscallsOfSelf(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	before, err := ReadSyscalls(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	buf := make([]byte, 1)
	for range n {
		if _, err := w.Write(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	after, err := ReadSyscalls(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after.Writes-before.Writes < n || after.Reads-before.Reads < n {
		t.Fatalf("after %d writes and reads: %+v moved to %+v", n, before, after)
	}
}
