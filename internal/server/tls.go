package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"

	"github.com/hetsched/hetsched/internal/certs"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/netaddr"
)

// How the server may be reached (DESIGN.md "Security model"):
//   - Loopback: anything; without tokens and client certificates auth is
//     off (the `hetsched up` sandbox).
//   - Off loopback: some authentication is required, tokens (--tokens) or
//     client certificates (--client-ca, which needs TLS); bearer tokens
//     need TLS too, unless --insecure-plaintext asks for cleartext, which
//     is then warned about at start.
//
// checkTransport applies those rules to the flags; warn is the line to
// print and log at start ("" for none).
func checkTransport(opt Options) (warn string, err error) {
	switch {
	case opt.TLSCert != "" && opt.TLSKey == "":
		return "", errs.Invalid("tls-key", "required with --tls-cert")
	case opt.TLSKey != "" && opt.TLSCert == "":
		return "", errs.Invalid("tls-cert", "required with --tls-key")
	case opt.ClientCA != "" && opt.TLSCert == "":
		return "", errs.Invalid("client-ca", "client certificates need TLS: give --tls-cert and --tls-key too")
	case opt.InsecurePlaintext && opt.TLSCert != "" && !opt.HA:
		// With --ha it may still be the members' (etcdmember.Config).
		return "", errs.Invalid("insecure-plaintext", "contradicts --tls-cert: the server serves TLS")
	}
	if netaddr.Loopback(opt.Listen) {
		return "", nil
	}
	if opt.TokensFile == "" && opt.ClientCA == "" {
		return "", errs.Invalid("listen", "without --tokens or --client-ca the server listens on loopback only; got %q", opt.Listen)
	}
	if opt.TLSCert == "" {
		if !opt.InsecurePlaintext {
			return "", errs.Invalid("listen", "bearer tokens would cross the network in cleartext on %q: give --tls-cert and --tls-key (hetsched certs makes them), or --insecure-plaintext to accept that", opt.Listen)
		}
		return fmt.Sprintf("WARNING: --insecure-plaintext: bearer tokens cross the network in cleartext on %s; anyone on the path can read and replay them (give --tls-cert and --tls-key)", opt.Listen), nil
	}
	return "", nil
}

// certOnlyAuth authenticates by client certificate alone (--client-ca
// without --tokens).
func certOnlyAuth() *Auth {
	return &Auth{certs: true, limits: newTenantLimits(nil)}
}

// describeAuth is the start-up line that says how callers authenticate.
func describeAuth(opt Options, auth *Auth) string {
	var how []string
	if opt.TokensFile != "" {
		how = append(how, "bearer tokens from "+opt.TokensFile)
	}
	if opt.ClientCA != "" {
		how = append(how, "client certificates signed by "+opt.ClientCA)
	}
	if auth == nil || len(how) == 0 {
		return "authentication is off (no --tokens or --client-ca): listening on loopback only, everything is tenant \"default\""
	}
	return "authentication is on: " + strings.Join(how, ", ")
}

// certPrincipal is the principal of a client certificate the handshake
// verified against --client-ca.
func certPrincipal(c *x509.Certificate) (Principal, error) {
	role, tenant, nodes, err := certs.Identity(c)
	if err != nil {
		return Principal{}, err
	}
	return Principal{Role: role, Tenant: tenant, Nodes: nodes}, nil
}

// verifiedCert is the client certificate of a request, when the TLS
// handshake verified one.
func verifiedCert(cs *tls.ConnectionState) *x509.Certificate {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return nil
	}
	return cs.VerifiedChains[0][0]
}
