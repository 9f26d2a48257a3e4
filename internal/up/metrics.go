package up

import (
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/hetsched/hetsched/internal/agent"
)

// AgentMetricsAddr is where up serves its agents' metrics: the agents'
// default --metrics-listen, where deploy/prometheus's commented
// hetsched-agent scrape job points.
const AgentMetricsAddr = "127.0.0.1:7076"

// agentSet is up's agents by node (the fleet's and the pool's), for one
// /metrics: each agent's series with a node label; the process-wide ones
// (go_*, process_*, hetsched_build_info) once.
type agentSet struct {
	mu     sync.Mutex
	agents map[string]*agent.Agent
}

func (s *agentSet) add(node string, a *agent.Agent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.agents[node] = a
}

func (s *agentSet) remove(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.agents, node)
}

// processWide reports whether a family is the process's, not an agent's.
func processWide(name string) bool {
	return strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || name == "hetsched_build_info"
}

// Gather implements prometheus.Gatherer.
func (s *agentSet) Gather() ([]*dto.MetricFamily, error) {
	s.mu.Lock()
	nodes := make([]string, 0, len(s.agents))
	for n := range s.agents {
		nodes = append(nodes, n)
	}
	agents := make([]*agent.Agent, len(nodes))
	sort.Strings(nodes)
	for i, n := range nodes {
		agents[i] = s.agents[n]
	}
	s.mu.Unlock()
	byName := map[string]*dto.MetricFamily{}
	for i, a := range agents {
		fams, err := a.Gatherer().Gather()
		if err != nil {
			return nil, err
		}
		for _, f := range fams {
			name := f.GetName()
			if processWide(name) {
				if _, seen := byName[name]; !seen {
					byName[name] = f
				}
				continue
			}
			out := byName[name]
			if out == nil {
				out = &dto.MetricFamily{Name: f.Name, Help: f.Help, Type: f.Type}
				byName[name] = out
			}
			for _, m := range f.Metric {
				m.Label = append(m.Label, &dto.LabelPair{Name: proto.String("node"), Value: proto.String(nodes[i])})
				sort.Slice(m.Label, func(a, b int) bool { return m.Label[a].GetName() < m.Label[b].GetName() })
				out.Metric = append(out.Metric, m)
			}
		}
	}
	out := make([]*dto.MetricFamily, 0, len(byName))
	for _, f := range byName {
		out = append(out, f)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].GetName() < out[b].GetName() })
	return out, nil
}

// serveAgentMetrics serves the agents' metrics on addr until stop; ""
// and a note when the address is taken (another up, or an agent).
func serveAgentMetrics(s *agentSet, addr string) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", func() {}, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/metrics", func() { _ = srv.Close() }, nil
}
