package cli

import (
	"context"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/server/servertest"
)

func TestAPIErrorSaysEachThingOnce(t *testing.T) {
	for _, c := range []struct {
		e    APIError
		want string
	}{
		{APIError{400, "invalid_argument", "resorces", "invalid_argument: resorces: unknown field"}, "resorces: unknown field (400 invalid_argument)"},
		{APIError{400, "invalid_argument", "priority", "must be 0..3"}, "priority: must be 0..3 (400 invalid_argument)"},
		{APIError{404, "not_found", "", "no task \"x\""}, "no task \"x\" (404 not_found)"},
		{APIError{502, "http", "", "bad gateway"}, "bad gateway (HTTP 502)"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.e, got, c.want)
		}
	}
}

// TestServerErrorOnce: a real server's answer to a misspelt field.
func TestServerErrorOnce(t *testing.T) {
	c := NewClient(servertest.Start(t, node), "", 10*time.Second)
	_, err := c.Do(context.Background(), "POST", "/api/v1/tasks", []byte(`{"resorces":{"cpu":"1"}}`), nil)
	if err == nil || err.Error() != `resorces: unknown field; did you mean "resources"? (400 invalid_argument)` {
		t.Errorf("got %v", err)
	}
}
