package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// --cpu-profile-window: nothing is profiled before SIGUSR1, and the
// profile is written at SIGUSR2.
func TestWindowedCPUProfileFollowsTheSignals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	changes := make(chan bool, 4)
	stop := windowedCPUProfile(context.Background(), path, os.Stderr, func(running bool) { changes <- running })
	await := func(want bool) {
		t.Helper()
		select {
		case got := <-changes:
			if got != want {
				t.Fatalf("profile running %v, want %v", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the profile did not change to running=%v", want)
		}
	}
	if b, err := os.ReadFile(path); err != nil || len(b) != 0 {
		t.Fatalf("before the window: %d bytes, %v; want an empty file", len(b), err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	await(true)
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	await(false)
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Fatalf("after the window: %d bytes, %v; want a gzipped profile", len(b), err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A run that ends inside the window still writes its profile.
func TestWindowedCPUProfileWrittenAtTheEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	started := make(chan bool, 2)
	stop := windowedCPUProfile(context.Background(), path, os.Stderr, func(running bool) { started <- running })
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the profile did not start")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Fatalf("%d bytes, %v; want a gzipped profile", len(b), err)
	}
}
