// Package certs makes and reads the TLS material of a hetsched cluster: a
// private certificate authority, the server's certificate, agents'
// certificates that say which nodes they may serve, and clients'
// certificates that say who they act as (`hetsched certs`, like `kubeadm
// certs` or `nomad tls`). It also builds the tls.Configs of the server,
// the agents and the CLI, and maps a verified client certificate to a
// principal.
//
// Glossary:
//   - CA: the cluster's own certificate authority, ca.pem and ca-key.pem in
//     the certificate directory. It signs every other certificate; the
//     server trusts client certificates it signed (--client-ca), and
//     agents and the CLI trust the server certificate it signed (--ca).
//   - Leaf: a certificate the CA signed for one party: server, agent or
//     client, in <name>.pem with its key in <name>-key.pem.
//   - SAN (subject alternative name): the names a certificate is valid
//     for. A server certificate's DNS and IP SANs are the host names and
//     addresses clients reach it by. An agent certificate's DNS SANs are
//     the node names it may register, heartbeat and read assignments of:
//     each a plain node name (node-a) or a path.Match pattern (gpu-*);
//     hetsched never reads them as host names, and an agent certificate
//     cannot serve TLS (its only extended key usage is client auth).
//   - Role: what a client certificate's holder may do, in its Subject's
//     Organization: hetsched:agent, hetsched:admin, hetsched:tenant (then
//     its Common Name is the tenant) or hetsched:metrics. The same roles
//     as tokens.
//   - Member: one server of an HA control plane (--ha) as its embedded
//     etcd member: its certificate carries server and client auth (members
//     dial each other), the host names and addresses of its peer URL, and
//     the Common Name "hetsched member NAME" (MemberCN), which no other
//     leaf can have (their names allow no spaces): the members accept
//     peers by that name, so an agent's or client's certificate, though
//     signed by the same CA, cannot join or stream raft.
//   - Key usage: server certificates carry server auth, agent and client
//     certificates client auth, member certificates both; a certificate
//     used for a side it lacks is refused by the TLS handshake.
//
// Contracts: keys are ECDSA P-256, written 0600 in PKCS #8; serial numbers
// are 128 random bits from crypto/rand; existing files are never
// overwritten unless Force (then they are replaced atomically, by rename,
// so a server reloading them never reads half a file). Every error is an
// *errs.Error whose field is the flag that names the file (tls-cert, ca,
// ...) and whose message says what is wrong with it.
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
)

// The files of a certificate directory.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
)

// Kinds of leaf certificates.
const (
	KindServer = "server"
	KindAgent  = "agent"
	KindClient = "client"
	KindMember = "member"
)

// MemberCN is the Common Name of member name's certificate.
func MemberCN(name string) string { return "hetsched member " + name }

// Roles, as the server's tokens name them.
const (
	RoleAdmin   = "admin"
	RoleTenant  = "tenant"
	RoleAgent   = "agent"
	RoleMetrics = "metrics" // reads /metrics only (a Prometheus scraper)
)

// OrgPrefix prefixes the role in a client or agent certificate's Subject
// Organization (hetsched:agent, hetsched:admin, hetsched:tenant).
const OrgPrefix = "hetsched:"

// Default validities.
const (
	DefaultCAValidity   = 10 * 365 * 24 * time.Hour
	DefaultLeafValidity = 365 * 24 * time.Hour
)

// clockSkew backdates NotBefore, so a certificate made now is valid on a
// machine whose clock is a little behind.
const clockSkew = 5 * time.Minute

// CAOptions configure Init.
type CAOptions struct {
	// CommonName of the CA (default "hetsched CA" and 8 random hex digits).
	CommonName string
	// Validity is how long the CA is valid (default 10 years).
	Validity time.Duration
	// NotBefore is when it becomes valid (default: now, less 5 minutes of
	// clock skew).
	NotBefore time.Time
	// Force replaces an existing CA (every certificate it signed stops
	// being trusted).
	Force bool
}

// IssueOptions configure Issue.
type IssueOptions struct {
	// Kind is KindServer, KindAgent, KindClient or KindMember.
	Kind string
	// Name is the Subject Common Name and the files' base name. Defaults:
	// server "server"; agent the first node when it is a plain name;
	// client its role ("admin", "metrics"), or the tenant. A member's
	// is its name in --peers (required), its Common Name MemberCN(Name).
	Name string
	// DNSNames and IPs are a server or member certificate's SANs
	// (default localhost, 127.0.0.1 and ::1).
	DNSNames []string
	IPs      []net.IP
	// Nodes are an agent certificate's node names or path.Match patterns
	// (at least one; "*" is every node).
	Nodes []string
	// Role (admin, tenant or metrics) and Tenant are a client
	// certificate's.
	Role   string
	Tenant string
	// Validity is how long the certificate is valid (default 1 year);
	// NotBefore when it becomes valid (default now, less clock skew).
	Validity  time.Duration
	NotBefore time.Time
	// Force overwrites existing files of the same name.
	Force bool
}

// Init makes a CA in dir (created 0700 if missing): ca.pem and ca-key.pem.
func Init(dir string, opt CAOptions) error {
	if dir == "" {
		return errs.Invalid("dir", "a directory for the certificates is required")
	}
	certPath, keyPath := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	if err := checkFree("force", opt.Force, certPath, keyPath); err != nil {
		return err
	}
	validity := opt.Validity
	if validity == 0 {
		validity = DefaultCAValidity
	}
	if validity < 0 {
		return errs.Invalid("validity", "must be positive, got %s", validity)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return errs.Wrap(errs.Internal, "", err)
	}
	sn, err := serial()
	if err != nil {
		return err
	}
	cn := opt.CommonName
	if cn == "" {
		// Unique, so that messages about two clusters' CAs tell them apart.
		cn = fmt.Sprintf("hetsched CA %x", sn.Bytes()[:4])
	}
	notBefore := startOf(opt.NotBefore)
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"hetsched"}},
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return errs.Wrap(errs.Internal, "", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return errs.Invalid("dir", "%v", err)
	}
	return writePair(certPath, keyPath, der, key, opt.Force)
}

// Issue makes a leaf certificate signed by the CA in dir and returns the
// paths of the certificate and its key.
func Issue(dir string, opt IssueOptions) (certPath, keyPath string, err error) {
	tmpl := &x509.Certificate{BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature}
	name := opt.Name
	switch opt.Kind {
	case KindServer, KindMember:
		if len(opt.Nodes) > 0 || opt.Role != "" || opt.Tenant != "" {
			return "", "", errs.Invalid("kind", "a %s certificate takes DNS names and IPs only", opt.Kind)
		}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames, tmpl.IPAddresses = opt.DNSNames, opt.IPs
		if len(tmpl.DNSNames) == 0 && len(tmpl.IPAddresses) == 0 {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		for _, d := range tmpl.DNSNames {
			if d == "" || strings.ContainsAny(d, " \t/:") {
				return "", "", errs.Invalid("dns", "%q is not a host name", d)
			}
		}
		if opt.Kind == KindMember {
			if name == "" {
				return "", "", errs.Invalid("name", "a member certificate is for one member: give its name in --peers")
			}
			// Members dial each other: client auth too.
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
			tmpl.Subject.Organization = []string{OrgPrefix + KindMember}
		}
		if name == "" {
			name = "server"
		}
	case KindAgent:
		if len(opt.DNSNames) > 0 || len(opt.IPs) > 0 || opt.Role != "" || opt.Tenant != "" {
			return "", "", errs.Invalid("kind", "an agent certificate takes node names only")
		}
		if len(opt.Nodes) == 0 {
			return "", "", errs.Invalid("nodes", "name the nodes this agent may serve (names or patterns like gpu-*; * for any)")
		}
		for _, n := range opt.Nodes {
			if err := checkNodePattern(n); err != nil {
				return "", "", errs.Prefix("nodes", err)
			}
		}
		if name == "" {
			if !isPlainName(opt.Nodes[0]) {
				return "", "", errs.Invalid("name", "the first node %q is a pattern: give the agent a name", opt.Nodes[0])
			}
			name = opt.Nodes[0]
		}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		tmpl.Subject.Organization = []string{OrgPrefix + RoleAgent}
		tmpl.DNSNames = opt.Nodes
	case KindClient:
		if len(opt.Nodes) > 0 || len(opt.DNSNames) > 0 || len(opt.IPs) > 0 {
			return "", "", errs.Invalid("kind", "a client certificate takes a role and a tenant only")
		}
		switch opt.Role {
		case RoleAdmin, RoleMetrics:
			if opt.Tenant != "" {
				return "", "", errs.Invalid("tenant", "only tenant certificates name a tenant")
			}
			if name == "" {
				name = opt.Role
			}
		case RoleTenant:
			if err := api.ValidateID("tenant", opt.Tenant); err != nil {
				return "", "", err
			}
			if name != "" && name != opt.Tenant {
				return "", "", errs.Invalid("name", "a tenant certificate's name is its tenant %q", opt.Tenant)
			}
			name = opt.Tenant
		default:
			return "", "", errs.Invalid("role", "must be admin, tenant or metrics, got %q (agents: hetsched certs agent)", opt.Role)
		}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		tmpl.Subject.Organization = []string{OrgPrefix + opt.Role}
	default:
		return "", "", errs.Invalid("kind", "must be server, agent, client or member, got %q", opt.Kind)
	}
	if err := api.ValidateID("name", name); err != nil {
		return "", "", err
	}
	tmpl.Subject.CommonName = name
	if opt.Kind == KindMember {
		tmpl.Subject.CommonName = MemberCN(name)
	}
	base := name
	if opt.Kind != KindServer || name != "server" {
		base = opt.Kind + "-" + name
	}
	certPath, keyPath = filepath.Join(dir, base+".pem"), filepath.Join(dir, base+"-key.pem")
	if err := checkFree("force", opt.Force, certPath, keyPath); err != nil {
		return "", "", err
	}
	ca, caKey, err := loadCA(dir)
	if err != nil {
		return "", "", err
	}
	validity := opt.Validity
	if validity == 0 {
		validity = DefaultLeafValidity
	}
	if validity < 0 {
		return "", "", errs.Invalid("validity", "must be positive, got %s", validity)
	}
	tmpl.NotBefore = startOf(opt.NotBefore)
	tmpl.NotAfter = tmpl.NotBefore.Add(validity)
	if tmpl.NotAfter.After(ca.NotAfter) {
		return "", "", errs.Invalid("validity", "the certificate would outlive the CA, which expires on %s", ca.NotAfter.UTC().Format(time.RFC3339))
	}
	if tmpl.SerialNumber, err = serial(); err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", errs.Wrap(errs.Internal, "", err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return "", "", errs.Wrap(errs.Internal, "", err)
	}
	return certPath, keyPath, writePair(certPath, keyPath, der, key, opt.Force)
}

// checkNodePattern checks one node name or path.Match pattern.
func checkNodePattern(p string) error {
	if p == "" || len(p) > api.MaxIDLen || strings.ContainsAny(p, " \t\r\n/") {
		return errs.Invalid("", "%q is not a node name or pattern", p)
	}
	if _, err := path.Match(p, ""); err != nil {
		return errs.Invalid("", "%q is not a valid pattern: %v", p, err)
	}
	if isPlainName(p) {
		return api.ValidateID("", p)
	}
	return nil
}

func isPlainName(p string) bool { return !strings.ContainsAny(p, `*?[\`) }

func startOf(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now().Add(-clockSkew).Truncate(time.Second)
	}
	return t
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, errs.Wrap(errs.Internal, "", err)
	}
	return n.Add(n, big.NewInt(1)), nil // positive, never 0
}

// checkFree refuses when a file exists, unless force.
func checkFree(field string, force bool, paths ...string) error {
	if force {
		return nil
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			return errs.New(errs.AlreadyExists, field, "%s exists: not overwritten (--force replaces it)", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return errs.Invalid("dir", "%v", err)
		}
	}
	return nil
}

// writePair writes the certificate (0644) and its key (0600): new files
// only, or replaced by rename with force. The key is written first: a
// certificate on disk always has its key.
func writePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey, force bool) error {
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return errs.Wrap(errs.Internal, "", err)
	}
	if err := writeFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600, force); err != nil {
		return err
	}
	return writeFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644, force)
}

func writeFile(p string, data []byte, perm os.FileMode, force bool) error {
	if !force {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err != nil {
			if errors.Is(err, fs.ErrExist) {
				return errs.New(errs.AlreadyExists, "force", "%s exists: not overwritten (--force replaces it)", p)
			}
			return errs.Invalid("dir", "%v", err)
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return errs.Invalid("dir", "%v", err)
		}
		return nil
	}
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*")
	if err != nil {
		return errs.Invalid("dir", "%v", err)
	}
	tmp := f.Name()
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return errs.Invalid("dir", "%v", err)
	}
	return nil
}

// loadCA reads the CA of dir for signing.
func loadCA(dir string) (*x509.Certificate, crypto.Signer, error) {
	certs, err := readCerts("dir", filepath.Join(dir, CAFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, errs.Invalid("dir", "no CA in %s: run hetsched certs init first", dir)
		}
		return nil, nil, err
	}
	ca := certs[0]
	if err := checkCA("dir", filepath.Join(dir, CAFile), ca); err != nil {
		return nil, nil, err
	}
	if err := checkValid("dir", filepath.Join(dir, CAFile), ca, time.Now()); err != nil {
		return nil, nil, err
	}
	key, err := readKey("dir", filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, err
	}
	if err := checkKeyMatches("dir", filepath.Join(dir, CAKeyFile), filepath.Join(dir, CAFile), ca, key); err != nil {
		return nil, nil, err
	}
	return ca, key, nil
}

// readCerts reads every CERTIFICATE block of a PEM file (at least one).
// A missing file's error wraps fs.ErrNotExist.
func readCerts(field, p string) ([]*x509.Certificate, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, &errs.Error{Code: errs.InvalidArgument, Field: field, Message: fileError(p, err), Err: err}
	}
	var out []*x509.Certificate
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			if strings.Contains(blk.Type, "PRIVATE KEY") {
				return nil, errs.Invalid(field, "%s holds a private key, not a certificate", p)
			}
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, errs.Invalid(field, "%s: %v", p, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errs.Invalid(field, "%s is not a PEM certificate file (no CERTIFICATE block)", p)
	}
	return out, nil
}

// readKey reads a PEM private key (PKCS #8, SEC 1 EC or PKCS #1 RSA).
func readKey(field, p string) (crypto.Signer, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, &errs.Error{Code: errs.InvalidArgument, Field: field, Message: fileError(p, err), Err: err}
	}
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			return nil, errs.Invalid(field, "%s is not a PEM private key file (no PRIVATE KEY block)", p)
		}
		var k any
		switch blk.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(blk.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
		case "CERTIFICATE":
			return nil, errs.Invalid(field, "%s holds a certificate, not its private key", p)
		default:
			continue
		}
		if err != nil {
			return nil, errs.Invalid(field, "%s: %v", p, err)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, errs.Invalid(field, "%s: unsupported key type %T", p, k)
		}
		return s, nil
	}
}

func fileError(p string, err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("%s: no such file", p)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Sprintf("%s: permission denied", p)
	}
	return err.Error()
}

func checkKeyMatches(field, keyPath, certPath string, c *x509.Certificate, key crypto.Signer) error {
	pub, ok := c.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return errs.Invalid(field, "%s is not the key of the certificate in %s", keyPath, certPath)
	}
	return nil
}

func checkCA(field, p string, c *x509.Certificate) error {
	if !c.BasicConstraintsValid || !c.IsCA {
		return errs.Invalid(field, "%s is not a CA certificate (%s): give the CA's ca.pem", p, describe(c))
	}
	return nil
}

// checkValid refuses a certificate outside its validity period at now.
func checkValid(field, p string, c *x509.Certificate, now time.Time) error {
	if now.After(c.NotAfter) {
		return errs.Invalid(field, "%s (%s) expired on %s", p, describe(c), c.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(c.NotBefore) {
		return errs.Invalid(field, "%s (%s) is not valid yet: from %s", p, describe(c), c.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

// describe names a certificate for messages.
func describe(c *x509.Certificate) string {
	s := "CN=" + c.Subject.CommonName
	if len(c.Subject.Organization) > 0 {
		s += ", O=" + strings.Join(c.Subject.Organization, "+")
	}
	return s
}

// Identity maps a client certificate, verified by the TLS handshake
// against the server's --client-ca, to a principal: its role from the
// Subject Organization (hetsched:agent, hetsched:admin, hetsched:tenant,
// hetsched:metrics);
// a tenant's name from the Common Name; an agent's node names or patterns
// from its DNS SANs (at least one).
func Identity(c *x509.Certificate) (role, tenant string, nodes []string, err error) {
	if len(c.ExtKeyUsage) > 0 && !hasUsage(c, x509.ExtKeyUsageClientAuth) {
		return "", "", nil, errs.New(errs.Unauthenticated, "", "client certificate %s is not for client authentication", describe(c))
	}
	for _, o := range c.Subject.Organization {
		r, ok := strings.CutPrefix(o, OrgPrefix)
		if !ok {
			continue
		}
		if role != "" && r != role {
			return "", "", nil, errs.New(errs.Unauthenticated, "", "client certificate %s names two roles", describe(c))
		}
		role = r
	}
	switch role {
	case RoleAdmin, RoleMetrics:
		return role, "", nil, nil
	case RoleTenant:
		if err := api.ValidateID("", c.Subject.CommonName); err != nil {
			return "", "", nil, errs.New(errs.Unauthenticated, "", "tenant certificate %s: its common name must be the tenant: %s", describe(c), message(err))
		}
		return role, c.Subject.CommonName, nil, nil
	case RoleAgent:
		if len(c.DNSNames) == 0 {
			return "", "", nil, errs.New(errs.Unauthenticated, "", "agent certificate %s names no nodes (DNS SANs)", describe(c))
		}
		for _, n := range c.DNSNames {
			if err := checkNodePattern(n); err != nil {
				return "", "", nil, errs.New(errs.Unauthenticated, "", "agent certificate %s: %s", describe(c), message(err))
			}
		}
		return role, "", append([]string(nil), c.DNSNames...), nil
	case "":
		return "", "", nil, errs.New(errs.Unauthenticated, "", "client certificate %s names no hetsched role (Organization %sagent, %sadmin, %stenant or %smetrics)", describe(c), OrgPrefix, OrgPrefix, OrgPrefix, OrgPrefix)
	}
	return "", "", nil, errs.New(errs.Unauthenticated, "", "client certificate %s names an unknown role %q", describe(c), role)
}

func hasUsage(c *x509.Certificate, u x509.ExtKeyUsage) bool {
	for _, x := range c.ExtKeyUsage {
		if x == u || x == x509.ExtKeyUsageAny {
			return true
		}
	}
	return false
}

// message is an error's message without its code and field.
func message(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
