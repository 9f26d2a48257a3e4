package server

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
)

// Roles of a token.
const (
	RoleAdmin  = "admin"
	RoleTenant = "tenant"
	RoleAgent  = "agent"
)

// DefaultTenant owns everything when authentication is off.
const DefaultTenant = "default"

// Token is one entry of --tokens.
type Token struct {
	Token  string `json:"token"`
	Role   string `json:"role"`
	Tenant string `json:"tenant,omitempty"`
}

// TokensFile is the --tokens file format.
type TokensFile struct {
	Tokens []Token `json:"tokens"`
}

// Principal is who a request acts for.
type Principal struct {
	Role   string
	Tenant string // for tenants; DefaultTenant when auth is off
}

// sees reports whether p may see and change a task owned by tenant.
func (p Principal) sees(tenant string) bool {
	return p.Role == RoleAdmin || p.Tenant == tenant
}

// Auth checks bearer tokens. A nil *Auth means authentication is off:
// every request acts as an admin of tenant "default".
type Auth struct {
	tokens []Token
}

// LoadTokens reads and validates a --tokens file.
func LoadTokens(path string) (*Auth, error) {
	var f TokensFile
	if err := readConfigFile("tokens", path, &f); err != nil {
		return nil, err
	}
	if len(f.Tokens) == 0 {
		return nil, errs.Invalid("tokens", "%s lists no tokens", path)
	}
	seen := map[string]bool{}
	for i, t := range f.Tokens {
		field := fmt.Sprintf("tokens[%d]", i)
		if len(t.Token) < 16 || len(t.Token) > 4096 || strings.ContainsAny(t.Token, " \t\r\n") {
			return nil, errs.Invalid(field+".token", "must be 16-4096 characters without spaces")
		}
		if seen[t.Token] {
			return nil, errs.Invalid(field+".token", "duplicate token")
		}
		seen[t.Token] = true
		switch t.Role {
		case RoleAdmin, RoleAgent:
			if t.Tenant != "" {
				return nil, errs.Invalid(field+".tenant", "only tenant tokens name a tenant")
			}
		case RoleTenant:
			if err := api.ValidateID(field+".tenant", t.Tenant); err != nil {
				return nil, err
			}
		default:
			return nil, errs.Invalid(field+".role", "must be admin, tenant or agent, got %q", t.Role)
		}
	}
	return &Auth{tokens: f.Tokens}, nil
}

// authenticate finds the principal of a request.
func (a *Auth) authenticate(r *http.Request) (Principal, error) {
	if a == nil {
		return Principal{Role: RoleAdmin, Tenant: DefaultTenant}, nil
	}
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
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
	return Principal{Role: found.Role, Tenant: found.Tenant}, nil
}

type principalKey struct{}

func principalOf(r *http.Request) Principal {
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
		h(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	}
}
