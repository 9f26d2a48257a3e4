//go:build partsguard

package kubewire

// partsGuard: this is the test build that checksums each decoded part
// when it is cached and verifies it when it is found and when it is
// evicted (go test -tags partsguard; CI runs it under -race).
const partsGuard = true
