package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
)

// ServerTLSConfig is the server's TLS: TLS 1.2 or later, HTTP/2 and
// HTTP/1.1 by ALPN, the certificate and key of certFile and keyFile
// (reloaded from disk when either file changes, at the next handshake;
// a change that does not load keeps the previous pair). With
// clientCAFile, clients may present a certificate signed by one of its
// CAs, verified in the handshake (a bad one fails the handshake; none at
// all is allowed, for token clients).
func ServerTLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	switch {
	case certFile == "":
		return nil, errs.Invalid("tls-cert", "required with --tls-key")
	case keyFile == "":
		return nil, errs.Invalid("tls-key", "required with --tls-cert")
	}
	r := &reloader{certPath: certFile, keyPath: keyFile, certField: "tls-cert", keyField: "tls-key", usage: x509.ExtKeyUsageServerAuth}
	if err := r.load(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return r.get(), nil },
	}
	if clientCAFile != "" {
		pool, err := loadPool("client-ca", clientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// ClientTLSConfig is an agent's or the CLI's TLS: the server's
// certificate is verified against caFile's CAs (the system's when
// caFile is ""), and certFile and keyFile, when given, are presented as
// the client's certificate (reloaded from disk at a new connection when
// they change). A certificate that is expired, not yet valid or not for
// client authentication is refused here, before any connection.
func ClientTLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := loadPool("ca", caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	switch {
	case certFile == "" && keyFile == "":
		return cfg, nil
	case certFile == "":
		return nil, errs.Invalid("cert", "required with --key")
	case keyFile == "":
		return nil, errs.Invalid("key", "required with --cert")
	}
	r := &reloader{certPath: certFile, keyPath: keyFile, certField: "cert", keyField: "key", usage: x509.ExtKeyUsageClientAuth}
	if err := r.load(); err != nil {
		return nil, err
	}
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return r.get(), nil }
	return cfg, nil
}

// loadPool reads a CA bundle: every certificate in it must be a CA and
// valid now.
func loadPool(field, p string) (*x509.CertPool, error) {
	cs, err := readCerts(field, p)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	now := time.Now()
	for _, c := range cs {
		if err := checkCA(field, p, c); err != nil {
			return nil, err
		}
		if err := checkValid(field, p, c, now); err != nil {
			return nil, err
		}
		pool.AddCert(c)
	}
	return pool, nil
}

// LoadKeyPair reads a certificate chain and its key, checking that they
// match and that the certificate is valid now; certField and keyField
// name the flags in errors.
func LoadKeyPair(certField, keyField, certPath, keyPath string) (*tls.Certificate, error) {
	cs, err := readCerts(certField, certPath)
	if err != nil {
		return nil, err
	}
	key, err := readKey(keyField, keyPath)
	if err != nil {
		return nil, err
	}
	if err := checkKeyMatches(keyField, keyPath, certPath, cs[0], key); err != nil {
		return nil, err
	}
	if err := checkValid(certField, certPath, cs[0], time.Now()); err != nil {
		return nil, err
	}
	kp := &tls.Certificate{PrivateKey: key, Leaf: cs[0]}
	for _, c := range cs {
		kp.Certificate = append(kp.Certificate, c.Raw)
	}
	return kp, nil
}

// reloader holds a key pair and reads it again when its files change.
type reloader struct {
	certPath, keyPath   string
	certField, keyField string
	usage               x509.ExtKeyUsage

	mu    sync.Mutex
	cur   *tls.Certificate
	stamp [2]fileStamp // of the files last tried
}

// fileStamp tells whether a file changed: another file (a rename over
// it), another modification time or another size.
type fileStamp struct {
	fi os.FileInfo
}

func (a fileStamp) same(b fileStamp) bool {
	if a.fi == nil || b.fi == nil {
		return a.fi == b.fi
	}
	return os.SameFile(a.fi, b.fi) && a.fi.ModTime().Equal(b.fi.ModTime()) && a.fi.Size() == b.fi.Size()
}

func (r *reloader) stamps() ([2]fileStamp, bool) {
	var s [2]fileStamp
	for i, p := range []string{r.certPath, r.keyPath} {
		fi, err := os.Stat(p)
		if err != nil {
			return s, false
		}
		s[i] = fileStamp{fi}
	}
	return s, true
}

// load reads the pair now; an error leaves the current pair in place.
func (r *reloader) load() error {
	st, _ := r.stamps()
	kp, err := LoadKeyPair(r.certField, r.keyField, r.certPath, r.keyPath)
	if err == nil && len(kp.Leaf.ExtKeyUsage) > 0 && !hasUsage(kp.Leaf, r.usage) {
		want := map[x509.ExtKeyUsage]string{x509.ExtKeyUsageServerAuth: "server", x509.ExtKeyUsageClientAuth: "client"}[r.usage]
		err = errs.Invalid(r.certField, "%s (%s) is not a %s certificate (no %s authentication usage)", r.certPath, describe(kp.Leaf), want, want)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stamp = st
	if err != nil {
		return err
	}
	r.cur = kp
	return nil
}

// get is the current pair, read again first when a file changed since
// the last try (a missing file, during a copy, keeps the current pair).
func (r *reloader) get() *tls.Certificate {
	st, ok := r.stamps()
	r.mu.Lock()
	changed := ok && !(st[0].same(r.stamp[0]) && st[1].same(r.stamp[1]))
	r.mu.Unlock()
	if changed {
		_ = r.load()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// Hint explains a TLS failure of a client's request in a person's words,
// naming the flag to look at; "" when err is not about TLS.
func Hint(err error) string {
	if err == nil {
		return ""
	}
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	msg := err.Error()
	switch {
	case errors.As(err, &ua):
		return "the server's certificate is not signed by a CA this client trusts: check --ca ($HETSCHED_CA)"
	case errors.As(err, &hn):
		return "the server's certificate is not valid for " + hn.Host + ": reach it by a name or address in its SANs, or reissue it with hetsched certs server --dns/--ip"
	case errors.As(err, &ci):
		switch ci.Reason {
		case x509.Expired:
			return "the server's certificate has expired or is not valid yet (" + ci.Detail + "): the server needs a new one (hetsched certs server)"
		case x509.IncompatibleUsage:
			return "the server presents a certificate that is not for serving TLS"
		}
		return "the server's certificate is not acceptable: " + ci.Error()
	case strings.Contains(msg, "tls: expired certificate"):
		return "the server refused this client's certificate (--cert): it has expired or is not valid yet; issue a new one with hetsched certs"
	case strings.Contains(msg, "tls: unknown certificate authority"):
		return "the server refused this client's certificate (--cert): it is not signed by the CA the server trusts (its --client-ca)"
	case strings.Contains(msg, "tls: bad certificate"), strings.Contains(msg, "tls: unsupported certificate"):
		return "the server refused this client's certificate (--cert)"
	case strings.Contains(msg, "tls: certificate required"):
		return "the server asks for a client certificate: give --cert and --key"
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"), strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "the server speaks plain HTTP, not TLS: use an http:// URL"
	}
	return ""
}

// Explain is Hint for a request to server (an https:// URL) made with cfg. A TLS
// 1.3 server judges the client's certificate after the client's side of
// the handshake is done, so a client that sends its request at once often
// sees only a broken connection (broken pipe, reset), the server's alert
// lost; then Explain dials once more, sends nothing, and reads the alert
// (quoted after the hint).
func Explain(err error, server string, cfg *tls.Config) string {
	if h := Hint(err); h != "" || cfg == nil || (cfg.GetClientCertificate == nil && len(cfg.Certificates) == 0) || !brokenConn(err) {
		return h
	}
	u, uerr := url.Parse(server)
	if uerr != nil || u.Scheme != "https" {
		return ""
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	perr := probe(addr, cfg, 5*time.Second)
	if h := Hint(perr); h != "" {
		return h + " (" + perr.Error() + ")"
	}
	return ""
}

// brokenConn: err is a connection that broke (not a timeout, not a
// cancelled request, not a failure to connect at all).
func brokenConn(err error) bool {
	var ne net.Error
	var op *net.OpError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout(), errors.As(err, &op) && op.Op == "dial":
		return false
	case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}
	m := err.Error()
	// HTTP/2's transport reports a connection lost during its set-up
	// without the cause.
	return strings.Contains(m, "broken pipe") || strings.Contains(m, "connection reset") || strings.HasSuffix(m, "EOF") ||
		strings.Contains(m, "client conn could not be established")
}

// probe handshakes with addr and waits up to timeout for the server's
// first word: its HTTP/2 settings (nil: it accepted us) or an alert.
func probe(addr string, cfg *tls.Config, timeout time.Duration) error {
	c := cfg.Clone()
	c.NextProtos = []string{"h2"}
	if c.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return err
		}
		c.ServerName = host
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", addr, c)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	_, err = conn.Read(make([]byte, 1))
	return err
}

// CheckMember checks an HA member's TLS material before its etcd member
// starts, so that a mistake is named at once rather than as peers that
// never connect: the certificate and key (certField, keyField) match and
// are valid now, the certificate is for server and client auth, its
// Common Name is MemberCN(name), and caFile's CAs (caField) verify it.
func CheckMember(certField, keyField, caField, certFile, keyFile, caFile, name string) error {
	kp, err := LoadKeyPair(certField, keyField, certFile, keyFile)
	if err != nil {
		return err
	}
	pool, err := loadPool(caField, caFile)
	if err != nil {
		return err
	}
	c := kp.Leaf
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if !hasUsage(c, u) {
			return errs.Invalid(certField, "%s is not a member certificate (it lacks server or client auth): make one with hetsched certs member --name %s", describe(c), name)
		}
	}
	if want := MemberCN(name); c.Subject.CommonName != want {
		return errs.Invalid(certField, "%s is not member %s's certificate (its common name should be %q): make one with hetsched certs member --name %s", describe(c), name, want, name)
	}
	inter := x509.NewCertPool()
	for _, raw := range kp.Certificate[1:] {
		if ic, err := x509.ParseCertificate(raw); err == nil {
			inter.AddCert(ic)
		}
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return errs.Invalid(caField, "%s does not verify %s: %v", caFile, describe(c), err)
	}
	return nil
}
