package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
)

// The agent protocol (API.md "agents"): register, heartbeat, a stream of
// assignments, status reports. {agent} is the agent's name: a node agent
// is named after its node; one agent may serve many nodes (a fake fleet).

// agentAPI is the agent protocol's handlers; every one is for agents'
// tokens (servesAgent checks the agent's name against the token's).
type agentAPI struct {
	s *Server
}

// AgentKeepAlive is how often an idle assignment stream sends a ping; an
// agent that reads nothing for a few of them reconnects.
const AgentKeepAlive = 10 * time.Second

func (aa *agentAPI) agentRegister(w http.ResponseWriter, r *http.Request) {
	s := aa.s
	b, err := readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	// Nodes are decoded one by one so that errors name them (nodes[3].x).
	var raw struct {
		Agent     string            `json:"agent"`
		Nodes     []json.RawMessage `json:"nodes"`
		Logs      string            `json:"logs"`
		LogsToken string            `json:"logsToken"`
	}
	if err := decodeStrict(b, &raw); err != nil {
		writeError(w, err)
		return
	}
	if len(raw.Nodes) > agentapi.MaxAgentNodes {
		writeError(w, errs.Invalid("nodes", "at most %d nodes per agent", agentapi.MaxAgentNodes))
		return
	}
	reg := agentapi.Registration{Agent: raw.Agent, Logs: raw.Logs, LogsToken: raw.LogsToken, Nodes: make([]api.Node, len(raw.Nodes))}
	for i, n := range raw.Nodes {
		if err := reg.Nodes[i].UnmarshalJSON(n); err != nil {
			writeError(w, errs.Prefix("nodes["+strconv.Itoa(i)+"]", err))
			return
		}
	}
	p := principalOf(w, r)
	for i := range reg.Nodes {
		if !p.mayServe(reg.Nodes[i].Name) {
			writeError(w, refuseNode("nodes["+strconv.Itoa(i)+"].name", reg.Nodes[i].Name))
			return
		}
	}
	if reg.Logs != "" {
		u, err := url.Parse(reg.Logs)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			writeError(w, errs.Invalid("logs", "must be an http(s) URL, got %q", reg.Logs))
			return
		}
	}
	reply, err := s.eng.Register(r.Context(), reg)
	if err != nil {
		writeError(w, err)
		return
	}
	s.log.InfoContext(r.Context(), "agent registered", "agent", reg.Agent, "nodes", len(reg.Nodes), "generation", reply.Generation)
	writeJSON(w, http.StatusOK, reply)
}

func (aa *agentAPI) agentHeartbeat(w http.ResponseWriter, r *http.Request) {
	s := aa.s
	b, err := readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	var body struct {
		Nodes []agentapi.Beat `json:"nodes"`
	}
	if err := decodeStrict(b, &body); err != nil {
		writeError(w, err)
		return
	}
	if err := agentapi.ValidateBeats(body.Nodes); err != nil {
		writeError(w, err)
		return
	}
	p := principalOf(w, r)
	for i := range body.Nodes {
		if !p.mayServe(body.Nodes[i].Node) {
			writeError(w, refuseNode("nodes["+strconv.Itoa(i)+"].node", body.Nodes[i].Node))
			return
		}
	}
	reply, err := s.eng.Heartbeat(r.Context(), r.PathValue("agent"), body.Nodes)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, reply)
}

func (aa *agentAPI) agentStatus(w http.ResponseWriter, r *http.Request) {
	s := aa.s
	b, err := readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	var body struct {
		Updates []agentapi.StatusUpdate `json:"updates"`
	}
	if err := decodeStrict(b, &body); err != nil {
		writeError(w, err)
		return
	}
	if !aa.servesAgent(w, r) {
		return
	}
	res, err := s.eng.AgentStatus(r.Context(), r.PathValue("agent"), body.Updates)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": res})
}

// agentAssignments is GET /agents/{agent}/assignments?generation=N: a
// stream of newline-delimited JSON messages (agentapi.AgentMessage), a
// snapshot first. generation (from register) makes a stream of a
// superseded registration fail with 409 instead of taking over.
func (aa *agentAPI) agentAssignments(w http.ResponseWriter, r *http.Request) {
	s := aa.s
	if !aa.servesAgent(w, r) {
		return
	}
	var gen uint64
	if v := r.URL.Query().Get("generation"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeError(w, errs.Invalid("generation", "must be the number register returned, got %q", v))
			return
		}
		gen = n
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{}) // a stream outlives the server's ReadTimeout
	stream, stop := s.streamContext(r)
	defer stop()
	started := false
	enc := json.NewEncoder(w)
	err := s.eng.AgentStream(stream, r.PathValue("agent"), gen, AgentKeepAlive, func(m *agentapi.AgentMessage) error {
		if !started {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		if err := enc.Encode(m); err != nil {
			return err
		}
		return rc.Flush()
	})
	if err != nil && !started {
		writeError(w, err)
	}
}

// servesAgent checks that the caller may act as the path's agent: a bound
// agent only for an agent whose every node it is bound to (so a token for
// gpu-* cannot read the assignments, and so the env, of cpu-1's agent).
// It writes the refusal.
func (aa *agentAPI) servesAgent(w http.ResponseWriter, r *http.Request) bool {
	s := aa.s
	p := principalOf(w, r)
	if p.Role == RoleAdmin || p.Nodes == nil {
		return true
	}
	for _, n := range s.eng.AgentNodes(r.PathValue("agent")) {
		if !p.mayServe(n) {
			writeError(w, refuseNode("agent", n))
			return false
		}
	}
	return true
}

// releaseNode is POST /api/v1/nodes/{name}/release (admin): the node is
// freed from its holder (the static inventory or an agent) and leaves the
// cluster, its tasks re-queued; the next agent to register the name holds
// it.
func (aa *agentAPI) releaseNode(w http.ResponseWriter, r *http.Request) {
	s := aa.s
	name := r.PathValue("name")
	holder, err := s.eng.ReleaseNode(r.Context(), name)
	if err != nil {
		writeError(w, err)
		return
	}
	from := "static inventory"
	if holder != "" {
		from = "agent " + holder
	}
	s.log.WarnContext(r.Context(), "node released", "node", name, "from", from)
	writeJSON(w, http.StatusOK, map[string]string{"name": name, "released": from})
}
