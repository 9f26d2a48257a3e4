package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"strings"

	"github.com/hetsched/hetsched/internal/api"
)

// ParseDependencyFlag reads --dependency as Slurm writes it, a comma
// separated list of TYPE:ID (afterok, afterany, afternotok) or plain IDs
// (afterok), one id per item (an id may hold ':', so Slurm's
// afterok:1:2 is written afterok:1,afterok:2). Slurm's '?' (any of) is
// refused: every dependency must be met.
func ParseDependencyFlag(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	if strings.Contains(s, "?") {
		return nil, fmt.Errorf("--dependency: '?' (any one of, in Slurm) is not supported: every dependency listed must be met; separate them with ','")
	}
	var out []string
	for _, d := range strings.Split(s, ",") {
		d = strings.TrimSpace(d)
		typ, id, err := api.ParseDependency(d)
		if err != nil {
			return nil, fmt.Errorf("--dependency %q: %v", d, err)
		}
		if err := api.ValidateID("id", id); err != nil {
			return nil, fmt.Errorf("--dependency %q: %v", d, err)
		}
		if typ == api.AfterOK && d == id {
			out = append(out, id)
		} else {
			out = append(out, typ+":"+id)
		}
	}
	return out, nil
}

// LocalUser is the name the client gives as its user when it sends no
// token (the server sets the user from a token): $USER, else the
// account's name, else "".
func LocalUser() string {
	if u := os.Getenv("USER"); u != "" && api.ValidateUser("user", u) == nil {
		return u
	}
	if u, err := user.Current(); err == nil && u.Username != "" && api.ValidateUser("user", u.Username) == nil {
		return u.Username
	}
	return ""
}

// Amend adds deps to a submission body (a task, a task list or a job:
// every task of a list, the job's own depends) and, when user is not
// empty, sets it where the body gives none.
func Amend(body []byte, deps []string, user string) ([]byte, error) {
	if len(deps) == 0 && user == "" {
		return body, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, fmt.Errorf("the spec is not a JSON object: %w", err)
	}
	if IsJob(body) || top["tasks"] == nil {
		if err := amendObject(top, deps, user); err != nil {
			return nil, err
		}
		return json.Marshal(top)
	}
	var tasks []map[string]json.RawMessage
	if err := json.Unmarshal(top["tasks"], &tasks); err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	for i := range tasks {
		if err := amendObject(tasks[i], deps, user); err != nil {
			return nil, fmt.Errorf("tasks[%d]: %w", i, err)
		}
	}
	b, err := json.Marshal(tasks)
	if err != nil {
		return nil, err
	}
	top["tasks"] = b
	return json.Marshal(top)
}

// amendObject appends deps to o's depends and sets its user if unset.
func amendObject(o map[string]json.RawMessage, deps []string, user string) error {
	if len(deps) > 0 {
		var have []string
		if raw, ok := o["depends"]; ok {
			if err := json.Unmarshal(raw, &have); err != nil {
				return fmt.Errorf("depends: %w", err)
			}
		}
		b, _ := json.Marshal(append(have, deps...))
		o["depends"] = b
	}
	if _, ok := o["user"]; !ok && user != "" {
		b, _ := json.Marshal(user)
		o["user"] = b
	}
	return nil
}
