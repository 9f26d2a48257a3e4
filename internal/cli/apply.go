package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
)

// Manifest is what `hetsched apply -f` reads: a queue tree (the --queues
// file's `queues:`), a node list (the --nodes file's `nodes:`) and
// services (`services:`, API.md "Service"), any of them in one file.
type Manifest struct {
	Queues    []api.Queue    `json:"queues,omitempty"`
	Nodes     []api.Node     `json:"nodes,omitempty"`
	Services  []api.Service  `json:"services,omitempty"`
	NodePools []api.NodePool `json:"nodePools,omitempty"`
}

// manifestKeys are the top-level keys of a Manifest.
var manifestKeys = []string{"queues", "nodes", "services", "nodePools"}

// topKeys are the top-level keys of a JSON (or YAML) object, sorted; ok is
// false when body is not an object.
func topKeys(body []byte) (map[string]json.RawMessage, []string, bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		j, err := yaml.YAMLToJSON(body)
		if err != nil || json.Unmarshal(j, &top) != nil {
			return nil, nil, false
		}
	}
	if top == nil {
		return nil, nil, false
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return top, keys, true
}

// NotTasks refuses, for `hetsched submit`, a file that is a queue tree or
// a node list (top-level `queues:` or `nodes:`, and no task or job field),
// saying which command takes it. Anything else is left to the server.
func NotTasks(body []byte) error {
	top, _, ok := topKeys(body)
	if !ok {
		return nil
	}
	_, queues := top["queues"]
	_, nodes := top["nodes"]
	if !queues && !nodes || looksLikeTasks(top) {
		return nil
	}
	what := "a queue tree (top-level queues:)"
	switch {
	case queues && nodes:
		what = "a queue tree and a node list (top-level queues: and nodes:)"
	case nodes:
		what = "a node list (top-level nodes:)"
	}
	also := "hetsched up --queues FILE or hetsched server --queues FILE"
	if nodes && !queues {
		also = "hetsched server --nodes FILE"
	}
	return fmt.Errorf("-f: the file is %s, not tasks: use hetsched apply -f FILE (or %s)", what, also)
}

// looksLikeTasks reports whether an object has a task's or a job's field.
func looksLikeTasks(top map[string]json.RawMessage) bool {
	for _, fields := range [][]string{api.JSONFields(&api.Task{}), api.JSONFields(&api.Job{})} {
		for _, f := range fields {
			if _, ok := top[f]; ok {
				return true
			}
		}
	}
	return false
}

// ParseManifest reads and validates an apply file (JSON, or YAML): every
// problem is an *errs.Error naming its field ("queues[1].weight",
// "nodes[0].devices[2].model"); unknown keys are refused with the closest
// known one.
func ParseManifest(body []byte) (Manifest, error) {
	var m Manifest
	top, keys, ok := topKeys(body)
	if !ok {
		return m, errs.Invalid("", "the file must be a mapping with queues:, nodes:, services: or nodePools: (the --queues, --nodes and --node-pools file formats, and services)")
	}
	if len(keys) == 0 {
		return m, errs.Invalid("", "the file is empty: give queues:, nodes:, services: or nodePools:")
	}
	for _, k := range keys {
		if slices.Contains(manifestKeys, k) {
			continue
		}
		if api.Suggest(k, manifestKeys) == "" && looksLikeTasks(top) {
			return m, errs.Invalid(k, "the file holds tasks or a job, not queues or nodes: use hetsched submit -f FILE")
		}
		return m, api.UnknownField(k, k, manifestKeys)
	}
	if raw, ok := top["queues"]; ok {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return m, errs.Invalid("queues", "must be a list of queues")
		}
		seen := map[string]bool{}
		for i, r := range list {
			field := fmt.Sprintf("queues[%d]", i)
			var q api.Queue
			if err := strictDecode(field, r, &q, nil); err != nil {
				return m, err
			}
			if q.Parent == api.RootQueue {
				q.Parent = ""
			}
			if err := q.Validate(); err != nil {
				return m, errs.Prefix(field, err)
			}
			if seen[q.Name] {
				return m, errs.Invalid(field+".name", "queue %q is in the file twice", q.Name)
			}
			seen[q.Name] = true
			m.Queues = append(m.Queues, q)
		}
	}
	if raw, ok := top["nodes"]; ok {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return m, errs.Invalid("nodes", "must be a list of nodes")
		}
		for i, r := range list {
			var n api.Node
			if err := strictDecode(fmt.Sprintf("nodes[%d]", i), r, &n, nodeFieldsAt); err != nil {
				return m, err
			}
			m.Nodes = append(m.Nodes, n)
		}
		if err := api.ValidateNodes(m.Nodes); err != nil {
			return m, err
		}
	}
	if raw, ok := top["services"]; ok {
		var err error
		if m.Services, err = parseServices(raw); err != nil {
			return m, err
		}
	}
	if raw, ok := top["nodePools"]; ok {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return m, errs.Invalid("nodePools", "must be a list of node pools")
		}
		for i, r := range list {
			var p api.NodePool
			if err := strictDecode(fmt.Sprintf("nodePools[%d]", i), r, &p, nil); err != nil {
				return m, err
			}
			m.NodePools = append(m.NodePools, p)
		}
		if err := api.ValidatePools(m.NodePools); err != nil {
			return m, err
		}
	}
	return m, nil
}

// parseServices reads and validates a manifest's services.
func parseServices(raw json.RawMessage) ([]api.Service, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errs.Invalid("services", "must be a list of services")
	}
	var out []api.Service
	seen := map[string]bool{}
	for i, r := range list {
		field := fmt.Sprintf("services[%d]", i)
		// The template on its own, for its fields' paths
		// ("services[0].template.command").
		var w struct {
			api.Service
			Template json.RawMessage `json:"template"`
		}
		if err := strictDecode(field, r, &w, nil); err != nil {
			return nil, err
		}
		s := w.Service
		if len(w.Template) > 0 {
			if err := strictDecode(field+".template", w.Template, &s.Template, nil); err != nil {
				return nil, err
			}
		}
		if err := s.Validate(); err != nil {
			return nil, errs.Prefix(field, err)
		}
		if seen[s.Name] {
			return nil, errs.Invalid(field+".name", "service %q is in the file twice", s.Name)
		}
		seen[s.Name] = true
		out = append(out, s)
	}
	return out, nil
}

// strictDecode decodes one object of the file into v, refusing unknown
// fields. An unknown field gets the closest known one at its place:
// fieldsAt says which fields are known at a path inside the object ("" is
// the object itself; nil: v's own fields everywhere).
func strictDecode(field string, raw []byte, v any, fieldsAt func(path string) []string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	if k, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		err = errs.Invalid(strings.Trim(k, `"`), "unknown field")
	}
	var e *errs.Error
	if errors.As(err, &e) {
		if e.Message == "unknown field" && e.Field != "" {
			at, k := "", e.Field
			if i := strings.LastIndexByte(e.Field, '.'); i >= 0 {
				at, k = e.Field[:i], e.Field[i+1:]
			}
			known := api.JSONFields(v)
			if fieldsAt != nil {
				known = fieldsAt(at)
			}
			return api.UnknownField(field+"."+e.Field, k, known)
		}
		return errs.Prefix(field, e)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		f := field
		if te.Field != "" {
			f += "." + te.Field
		}
		return errs.Invalid(f, "must be %s, got %s", te.Type, te.Value)
	}
	return errs.Invalid(field, "%v", err)
}

// nodeFieldsAt are the fields known at a path inside a node object: the
// node's, or a device's ("devices[2]").
func nodeFieldsAt(path string) []string {
	if strings.HasPrefix(path, "devices[") {
		return api.JSONFields(&api.Device{})
	}
	return api.JSONFields(&api.Node{})
}

// Apply creates or updates the file's queues (parents first) and nodes,
// kubectl's way: one line per object, "queue/team-a created", "configured"
// or "unchanged" (nothing sent). With -o json or yaml it prints the
// objects as the server answered them instead. An object the server
// refuses is reported and the others are still applied; the error names
// every refused one.
func Apply(ctx context.Context, c *Client, w io.Writer, body []byte, output string) error {
	m, err := ParseManifest(body)
	if err != nil {
		return fileError(err)
	}
	var out struct {
		Queues    []json.RawMessage `json:"queues,omitempty"`
		Nodes     []json.RawMessage `json:"nodes,omitempty"`
		Services  []json.RawMessage `json:"services,omitempty"`
		NodePools []json.RawMessage `json:"nodePools,omitempty"`
	}
	report := func(kind, name, action string) {
		if output == Table {
			fmt.Fprintf(w, "%s/%s %s\n", kind, name, action)
		}
	}
	var failed []error
	if len(m.Queues) > 0 {
		qs, err := applyQueues(ctx, c, m.Queues, report)
		out.Queues = qs
		failed = append(failed, err...)
	}
	if len(m.Nodes) > 0 {
		ns, err := applyNodes(ctx, c, m.Nodes, report)
		out.Nodes = ns
		failed = append(failed, err...)
	}
	if len(m.Services) > 0 {
		ss, err := applyServices(ctx, c, m.Services, report)
		out.Services = ss
		failed = append(failed, err...)
	}
	for _, p := range m.NodePools {
		b, _ := json.Marshal(p)
		var raw json.RawMessage
		status, err := c.Do(ctx, "PUT", "/api/v1/nodepools/"+url.PathEscape(p.Name), b, &raw)
		if err != nil {
			failed = append(failed, fmt.Errorf("nodepool/%s: %w", p.Name, err))
			continue
		}
		report("nodepool", p.Name, map[bool]string{true: "created", false: "configured"}[status == 201])
		out.NodePools = append(out.NodePools, raw)
	}
	if output != Table {
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		if err := printTasksRaw(w, b, output); err != nil {
			return err
		}
	}
	return errors.Join(failed...)
}

// fileError renders a file's problem as "-f: field: message".
func fileError(err error) error {
	var e *errs.Error
	if !errors.As(err, &e) {
		return fmt.Errorf("-f: %w", err)
	}
	if e.Field == "" {
		return fmt.Errorf("-f: %s", e.Message)
	}
	return fmt.Errorf("-f: %s: %s", e.Field, e.Message)
}

// QueueSpec is what GET /queues says of a queue's spec (apply compares
// it with a file's; up prints the tree). It is not api.Queue, whose
// decoder refuses the view's other members.
type QueueSpec struct {
	Name       string        `json:"name"`
	Parent     string        `json:"parent"`
	Guaranteed resource.List `json:"guaranteed"`
	Max        resource.List `json:"max"`
	Weight     float64       `json:"weight"`
}

// ListQueueSpecs reads every queue's spec.
func ListQueueSpecs(ctx context.Context, c *Client) ([]QueueSpec, error) {
	var body struct {
		Queues []QueueSpec `json:"queues"`
	}
	if _, err := c.Do(ctx, "GET", "/api/v1/queues", nil, &body); err != nil {
		return nil, fmt.Errorf("queues: %w", err)
	}
	return body.Queues, nil
}

// sameQueue reports whether the server's queue already is q.
func sameQueue(v QueueSpec, q api.Queue) bool {
	norm := func(parent string, w float64) (string, float64) {
		if parent == api.RootQueue {
			parent = ""
		}
		if w == 0 {
			w = 1
		}
		return parent, w
	}
	p1, w1 := norm(v.Parent, v.Weight)
	p2, w2 := norm(q.Parent, q.Weight)
	return p1 == p2 && w1 == w2 && sameList(v.Guaranteed, q.Guaranteed) && sameList(v.Max, q.Max)
}

func sameList(a, b resource.List) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if x, ok := b[k]; !ok || x != v {
			return false
		}
	}
	return true
}

// applyQueues puts the queues, in rounds: a queue refused as invalid (its
// parent not there yet, children's guarantees not fitting yet) is tried
// again after the others, as long as a round makes progress.
func applyQueues(ctx context.Context, c *Client, queues []api.Queue, report func(kind, name, action string)) ([]json.RawMessage, []error) {
	var list struct {
		Queues []json.RawMessage `json:"queues"`
	}
	if _, err := c.Do(ctx, "GET", "/api/v1/queues", nil, &list); err != nil {
		return nil, []error{fmt.Errorf("queues: %w", err)}
	}
	current := map[string]QueueSpec{}
	raws := map[string]json.RawMessage{}
	for _, raw := range list.Queues {
		var v QueueSpec
		if json.Unmarshal(raw, &v) == nil {
			current[v.Name], raws[v.Name] = v, raw
		}
	}
	var out []json.RawMessage
	pending := parentsFirst(queues)
	failed := map[string]error{}
	for len(pending) > 0 {
		var next []api.Queue
		for _, q := range pending {
			v, exists := current[q.Name]
			if exists && sameQueue(v, q) {
				report("queue", q.Name, "unchanged")
				out = append(out, raws[q.Name])
				continue
			}
			b, _ := json.Marshal(q)
			var raw json.RawMessage
			if _, err := c.Do(ctx, "PUT", "/api/v1/queues/"+url.PathEscape(q.Name), b, &raw); err != nil {
				failed[q.Name] = err
				var ae *APIError
				if errors.As(err, &ae) && ae.Code == string(errs.InvalidArgument) {
					next = append(next, q)
				}
				continue
			}
			delete(failed, q.Name)
			action := "created"
			if exists {
				action = "configured"
			}
			report("queue", q.Name, action)
			out = append(out, raw)
		}
		if len(next) == len(pending) {
			break
		}
		pending = next
	}
	var errList []error
	for _, q := range queues {
		if err, ok := failed[q.Name]; ok {
			errList = append(errList, fmt.Errorf("queue/%s: %w", q.Name, err))
		}
	}
	return out, errList
}

// parentsFirst orders queues so that a parent in the list comes before
// its children (the file's order otherwise).
func parentsFirst(queues []api.Queue) []api.Queue {
	byName := map[string]api.Queue{}
	for _, q := range queues {
		byName[q.Name] = q
	}
	depth := map[string]int{}
	for _, q := range queues {
		d := 0
		for p, ok := byName[q.Parent]; ok && d <= api.MaxQueueDepth; p, ok = byName[p.Parent] {
			d++
		}
		depth[q.Name] = d
	}
	out := slices.Clone(queues)
	slices.SortStableFunc(out, func(a, b api.Queue) int { return depth[a.Name] - depth[b.Name] })
	return out
}

// applyNodes puts the nodes; PUT /nodes/{name} answers 201 for a new one.
func applyNodes(ctx context.Context, c *Client, nodes []api.Node, report func(kind, name, action string)) ([]json.RawMessage, []error) {
	var list struct {
		Nodes []json.RawMessage `json:"nodes"`
	}
	if _, err := c.Do(ctx, "GET", "/api/v1/nodes", nil, &list); err != nil {
		return nil, []error{fmt.Errorf("nodes: %w", err)}
	}
	current := map[string]json.RawMessage{}
	for _, raw := range list.Nodes {
		var v struct{ Name string }
		if json.Unmarshal(raw, &v) == nil {
			current[v.Name] = raw
		}
	}
	var out []json.RawMessage
	var errList []error
	for _, n := range nodes {
		if raw, ok := current[n.Name]; ok && sameNode(raw, n) {
			report("node", n.Name, "unchanged")
			out = append(out, raw)
			continue
		}
		b, _ := json.Marshal(n)
		var raw json.RawMessage
		status, err := c.Do(ctx, "PUT", "/api/v1/nodes/"+url.PathEscape(n.Name), b, &raw)
		if err != nil {
			errList = append(errList, fmt.Errorf("node/%s: %w", n.Name, err))
			continue
		}
		action := "configured"
		if status == http.StatusCreated {
			action = "created"
		}
		report("node", n.Name, action)
		out = append(out, raw)
	}
	return out, errList
}

// sameNode reports whether the server's node view raw already has n's
// spec (a state n leaves out is not compared: PUT keeps the node's). An
// agent's node is never the same: its put is the server's to refuse.
func sameNode(raw json.RawMessage, n api.Node) bool {
	var v struct {
		Name     string            `json:"name"`
		Labels   map[string]string `json:"labels"`
		Taints   []string          `json:"taints"`
		Capacity resource.List     `json:"capacity"`
		Devices  []api.Device      `json:"devices"`
		State    string            `json:"state"`
		Agent    string            `json:"agent"`
	}
	if json.Unmarshal(raw, &v) != nil || v.Agent != "" {
		return false
	}
	have := api.Node{Name: v.Name, Labels: v.Labels, Taints: v.Taints, Capacity: v.Capacity, Devices: v.Devices, State: v.State}
	want := n
	if want.State == "" {
		have.State = ""
	}
	if want.State == api.NodeReady && have.State == api.NodeReady {
		want.State, have.State = "", ""
	}
	a, err1 := json.Marshal(have)
	b, err2 := json.Marshal(want)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}
