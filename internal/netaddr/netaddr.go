// Package netaddr answers questions about listen addresses that decide
// what a port may serve without credentials.
//
// Glossary:
//   - listen address: HOST:PORT as net.Listen takes it; an empty HOST
//     listens on every interface.
//   - loopback: a HOST of localhost or a loopback IP (127.0.0.0/8, ::1):
//     reachable from this machine only.
package netaddr

import "net"

// Loopback reports whether the listen address addr's host is loopback.
// A malformed address, or one without a host, is not.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
