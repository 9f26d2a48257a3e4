package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/hetsched/hetsched/internal/api"
)

// GetServers prints the control plane's servers (GET /api/v1/servers):
// NAME ROLE URL, the leader first; "*" marks the server that answered.
func GetServers(ctx context.Context, c *Client, w io.Writer, output string) error {
	var raw json.RawMessage
	if _, err := c.Do(ctx, http.MethodGet, "/api/v1/servers", nil, &raw); err != nil {
		return err
	}
	if !tabular(output) && output != Name {
		return printTasksRaw(w, raw, output)
	}
	var list api.ServerList
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("unexpected answer from %s: %w", c.Server, err)
	}
	head := func(wide bool) []string {
		if wide {
			return []string{"NAME", "ROLE", "URL", "STORE", "ANSWERED"}
		}
		return []string{"NAME", "ROLE", "URL"}
	}
	row := func(s api.ServerInfo, wide bool) []string {
		if !wide {
			return []string{s.Name, s.Role, s.URL}
		}
		answered := ""
		if s.Self {
			answered = "*"
		}
		return []string{s.Name, s.Role, s.URL, list.Store, answered}
	}
	if err := printObjects(&grid{w: w}, list.Servers, output, true, "server", func(s api.ServerInfo) string { return s.Name }, head, row); err != nil {
		return err
	}
	if list.Leader == "" && output != Name {
		_, err := fmt.Fprintln(w, "no leader is elected now")
		return err
	}
	return nil
}
