package api

// Server roles in GET /api/v1/servers.
const (
	RoleLeader  = "leader"
	RoleStandby = "standby"
)

// ServerList is GET /api/v1/servers: the control plane's servers, the
// leader first. A server on the embedded Pebble store is its own leader
// and the only server.
type ServerList struct {
	// Store is the backend: "pebble" or "etcd".
	Store string `json:"store"`
	// Leader is the leader's name ("" while none is elected).
	Leader  string       `json:"leader"`
	Servers []ServerInfo `json:"servers"`
}

// ServerInfo is one server of a ServerList.
type ServerInfo struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	Role string `json:"role"`
	// Self marks the server that answered.
	Self bool `json:"self,omitempty"`
}
