package server

import (
	"context"
	"crypto/subtle"
	"fmt"
	"math"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
)

// Roles of a token.
const (
	RoleAdmin  = "admin"
	RoleTenant = "tenant"
	RoleAgent  = "agent"
	// RoleMetrics may read /metrics and nothing else (a Prometheus
	// scraper's token).
	RoleMetrics = "metrics"
)

// DefaultTenant owns everything when authentication is off.
const DefaultTenant = "default"

// Token is one entry of --tokens.
type Token struct {
	Token  string `json:"token"`
	Role   string `json:"role"`
	Tenant string `json:"tenant,omitempty"`
	// User is who acts with the token: the user recorded on the work it
	// submits (default: its tenant, or for an admin token "admin").
	User string `json:"user,omitempty"`
	// Rate (requests/s) and Burst limit the tenant's API calls, over all
	// its tokens (a token bucket; 429 with Retry-After past it). Unset:
	// the server's --tenant-rate, if any.
	Rate  float64 `json:"rate,omitempty"`
	Burst int     `json:"burst,omitempty"`
	// Nodes bind an agent token to node names (path.Match patterns such
	// as "gpu-*"): it may register, heartbeat and follow only those.
	// Unset: any node.
	Nodes []string `json:"nodes,omitempty"`
}

// TokensFile is the --tokens file format.
type TokensFile struct {
	Tokens []Token `json:"tokens"`
}

// Principal is who a request acts for.
type Principal struct {
	Role   string
	Tenant string // for tenants; DefaultTenant when auth is off
	// User is who acts (Token.User); "" when auth is off, where the
	// client names its user itself.
	User string
	// Nodes, for an agent, are the node names it may register, heartbeat
	// and read assignments of: path.Match patterns from its token's
	// nodes, or the DNS names of its certificate. Nil: any node.
	Nodes []string
}

// sees reports whether p may see and change a task owned by tenant.
func (p Principal) sees(tenant string) bool {
	return p.Role == RoleAdmin || p.Tenant == tenant
}

// Auth checks client certificates and bearer tokens. A nil *Auth means
// authentication is off: every request acts as an admin of tenant
// "default".
type Auth struct {
	tokens []Token
	limits *tenantLimits
	// certs: client certificates are accepted (--client-ca).
	certs bool
}

// LoadTokens reads and validates a --tokens file.
func LoadTokens(file string) (*Auth, error) {
	var f TokensFile
	if err := readConfigFile("tokens", file, &f); err != nil {
		return nil, err
	}
	if len(f.Tokens) == 0 {
		return nil, errs.Invalid("tokens", "%s lists no tokens", file)
	}
	seen := map[string]bool{}
	perTenant := map[string]limit{}
	for i, t := range f.Tokens {
		field := fmt.Sprintf("tokens[%d]", i)
		if len(t.Token) < 16 || len(t.Token) > 4096 || strings.ContainsAny(t.Token, " \t\r\n") {
			return nil, errs.Invalid(field+".token", "must be 16-4096 characters without spaces")
		}
		if seen[t.Token] {
			return nil, errs.Invalid(field+".token", "duplicate token")
		}
		seen[t.Token] = true
		if len(t.Nodes) > 0 && t.Role != RoleAgent {
			return nil, errs.Invalid(field+".nodes", "only agent tokens are bound to nodes")
		}
		if t.User != "" && t.Role != RoleAdmin && t.Role != RoleTenant {
			return nil, errs.Invalid(field+".user", "only admin and tenant tokens submit work, so only they name a user")
		}
		if err := api.ValidateUser(field+".user", t.User); err != nil {
			return nil, err
		}
		if len(t.Nodes) > maxTokenNodes {
			return nil, errs.Invalid(field+".nodes", "at most %d patterns", maxTokenNodes)
		}
		for j, pat := range t.Nodes {
			if _, err := path.Match(pat, ""); err != nil || pat == "" || len(pat) > api.MaxIDLen {
				return nil, errs.Invalid(fmt.Sprintf("%s.nodes[%d]", field, j), "%q is not a node name pattern (path.Match syntax: *, ?, [a-z])", pat)
			}
		}
		switch t.Role {
		case RoleAdmin, RoleAgent, RoleMetrics:
			if t.Tenant != "" {
				return nil, errs.Invalid(field+".tenant", "only tenant tokens name a tenant")
			}
			if t.Rate != 0 || t.Burst != 0 {
				return nil, errs.Invalid(field+".rate", "only tenants are rate limited")
			}
		case RoleTenant:
			if err := api.ValidateID(field+".tenant", t.Tenant); err != nil {
				return nil, err
			}
			if strings.Contains(t.Tenant, engine.TenantSep) || t.Tenant == DefaultTenant {
				return nil, errs.Invalid(field+".tenant", "%q: a tenant name has no %q (it separates a tenant from its ids) and is not %q (the admins' own)", t.Tenant, engine.TenantSep, DefaultTenant)
			}
			if t.Rate < 0 || t.Rate > 1e9 || t.Rate != t.Rate || t.Burst < 0 || t.Burst > 1e9 || (t.Burst > 0 && t.Rate == 0) {
				return nil, errs.Invalid(field+".rate", "rate must be 0..1e9 requests/s and burst 0..1e9, a burst only with a rate")
			}
			if t.Rate > 0 {
				if prev, ok := perTenant[t.Tenant]; ok && prev != (limit{t.Rate, t.Burst}) {
					return nil, errs.Invalid(field+".rate", "tenant %q already has rate %g, burst %d from another token", t.Tenant, prev.rate, prev.burst)
				}
				perTenant[t.Tenant] = limit{t.Rate, t.Burst}
			}
		default:
			return nil, errs.Invalid(field+".role", "must be admin, tenant, agent or metrics, got %q", t.Role)
		}
	}
	return &Auth{tokens: f.Tokens, limits: newTenantLimits(perTenant)}, nil
}

// SetDefaultLimit limits the tenants without a rate of their own to rate
// requests/s with burst (0: unlimited).
func (a *Auth) SetDefaultLimit(rate float64, burst int) error {
	if rate < 0 || burst < 0 || rate != rate {
		return errs.Invalid("tenant-rate", "must not be negative")
	}
	if a != nil {
		a.limits.def = limit{rate, burst}
	}
	return nil
}

// authenticate finds the principal of a request. A client certificate
// the TLS handshake verified is the identity (certs.Identity); a bearer
// token is only read when the client presented no certificate.
func (a *Auth) authenticate(r *http.Request) (Principal, error) {
	if a == nil {
		return Principal{Role: RoleAdmin, Tenant: DefaultTenant}, nil
	}
	if c := verifiedCert(r.TLS); c != nil {
		return certPrincipal(c)
	}
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		if a.certs {
			return Principal{}, errs.New(errs.Unauthenticated, "", "present a client certificate or send Authorization: Bearer <token>")
		}
		return Principal{}, errs.New(errs.Unauthenticated, "", "send Authorization: Bearer <token>")
	}
	// Compare every token in constant time, so timing tells nothing.
	var found *Token
	for i := range a.tokens {
		if subtle.ConstantTimeCompare([]byte(a.tokens[i].Token), []byte(tok)) == 1 {
			found = &a.tokens[i]
		}
	}
	if found == nil {
		return Principal{}, errs.New(errs.Unauthenticated, "", "unknown token")
	}
	return Principal{Role: found.Role, Tenant: found.Tenant, Nodes: found.Nodes, User: found.user()}, nil
}

// owner is the tenant that owns what p submits: its own, or for an
// admin (and with authentication off) the default tenant.
func (p Principal) owner() string {
	if p.Tenant == "" {
		return DefaultTenant
	}
	return p.Tenant
}

// user is who acts with t (Token.User).
func (t *Token) user() string {
	switch {
	case t.User != "":
		return t.User
	case t.Tenant != "":
		return t.Tenant
	}
	return t.Role
}

// userOf is the user recorded on work p submits naming given: p's own,
// else (auth off) the given one; a tenant's token may not name another
// user (an admin's may, acting for them).
func (p Principal) userOf(given string) (string, error) {
	switch {
	case p.User == "" || given == p.User:
		return given, nil
	case given == "":
		return p.User, nil
	case p.Role == RoleAdmin:
		return given, nil
	}
	return "", errs.New(errs.PermissionDenied, "user", "this token acts as user %q; it may not submit as %q", p.User, given)
}

// maxTokenNodes bounds a token's node patterns.
const maxTokenNodes = 1024

// mayServe reports whether p may act for node: admins and unbound agents
// for any, a bound agent for the nodes its patterns match.
func (p Principal) mayServe(node string) bool {
	if p.Role == RoleAdmin || p.Nodes == nil {
		return true
	}
	for _, pat := range p.Nodes {
		if ok, _ := path.Match(pat, node); ok {
			return true
		}
	}
	return false
}

// refuseNode is the error for an agent acting for a node it is not bound
// to.
func refuseNode(field, node string) error {
	return errs.New(errs.PermissionDenied, field, "this agent's credentials are not bound to node %q", node)
}

type principalKey struct{}

// principalOf is the principal guard found for the request.
func principalOf(w http.ResponseWriter, r *http.Request) Principal {
	if sw, ok := w.(*statusWriter); ok && sw.authed {
		return sw.principal
	}
	p, _ := r.Context().Value(principalKey{}).(Principal)
	return p
}

// guard wraps a handler: it authenticates, then lets the roles in allow
// through (admin always).
func (s *Server) guard(h http.HandlerFunc, allow ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := s.auth.authenticate(r)
		if err != nil {
			writeError(w, err)
			return
		}
		ok := p.Role == RoleAdmin
		for _, role := range allow {
			ok = ok || p.Role == role
		}
		if !ok {
			writeError(w, errs.New(errs.PermissionDenied, "", "role %s may not %s %s", p.Role, r.Method, r.URL.Path))
			return
		}
		if p.Role == RoleTenant && s.auth != nil {
			if wait, l, limited := s.auth.limits.take(p.Tenant); limited {
				secs := int(math.Ceil(wait.Seconds()))
				w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
				writeError(w, errs.New(errs.RateLimited, "", "tenant %q is over its rate limit of %g requests/s (burst %d): retry after %s", p.Tenant, l.rate, l.burst, wait.Round(time.Millisecond)))
				return
			}
		}
		if sw, ok := w.(*statusWriter); ok {
			sw.principal, sw.authed = p, true
			h(w, r)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	}
}

// limit is a token bucket's rate (per second) and burst.
type limit struct {
	rate  float64
	burst int
}

// tenantLimits holds one token bucket per tenant.
type tenantLimits struct {
	mu        sync.Mutex
	perTenant map[string]limit
	def       limit
	buckets   map[string]*rate.Limiter
	now       func() time.Time // the buckets' clock (tests set it)
}

func newTenantLimits(per map[string]limit) *tenantLimits {
	return &tenantLimits{perTenant: per, buckets: map[string]*rate.Limiter{}, now: time.Now}
}

// take spends one token of tenant's bucket; when none is left it reports
// how long until one is, and spends nothing.
func (t *tenantLimits) take(tenant string) (time.Duration, limit, bool) {
	if t == nil {
		return 0, limit{}, false
	}
	t.mu.Lock()
	l, ok := t.perTenant[tenant]
	if !ok {
		l = t.def
	}
	if l.rate <= 0 {
		t.mu.Unlock()
		return 0, l, false
	}
	b := t.buckets[tenant]
	if b == nil {
		burst := l.burst
		if burst <= 0 {
			burst = max(1, int(math.Ceil(l.rate)))
		}
		b = rate.NewLimiter(rate.Limit(l.rate), burst)
		t.buckets[tenant] = b
	}
	t.mu.Unlock()
	now := t.now()
	res := b.ReserveN(now, 1)
	if !res.OK() {
		return time.Second, l, true
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d, l, true
	}
	return 0, l, false
}
