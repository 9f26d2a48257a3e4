//go:build !linux

package executor

import "errors"

// becomeSubreaper: only Linux has child subreapers. The agent runs tasks
// on Linux; a build for another system (the CLI on macOS) compiles, and
// its shim says why it cannot.
func becomeSubreaper() error {
	return errors.New("child subreapers are Linux's (PR_SET_CHILD_SUBREAPER)")
}
