package netaddr

import "testing"

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7075": true, "127.5.0.1:1": true, "localhost:7075": true, "[::1]:7075": true,
		"0.0.0.0:7075": false, ":7075": false, "[::]:7075": false, "10.0.0.5:7075": false,
		"host.example:7075": false, "127.0.0.1": false, "": false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
