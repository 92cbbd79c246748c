// Package tlstest makes throwaway certificates for tests: a CA, a server certificate for
// localhost and 127.0.0.1, and client certificates, written as PEM files into a test's temp
// directory. Nothing is committed and no openssl is needed.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Files are the PEM files of one test PKI.
type Files struct {
	// CA is the certificate of the authority that signed the others.
	CA string
	// ServerCert and ServerKey are valid for localhost, 127.0.0.1 and ::1, for server and
	// client authentication (a service presents the same pair when it calls another).
	ServerCert, ServerKey string
	// ClientCert and ClientKey are a client-only certificate signed by CA.
	ClientCert, ClientKey string
	// OtherCA signed OtherClientCert/OtherClientKey: a client the CA does not know.
	OtherCA                         string
	OtherClientCert, OtherClientKey string
}

// New writes a fresh PKI into t.TempDir().
func New(t testing.TB) Files {
	t.Helper()
	dir := t.TempDir()
	ca, caKey := authority(t, "vigil test CA")
	other, otherKey := authority(t, "someone else's CA")
	f := Files{
		CA:      filepath.Join(dir, "ca.pem"),
		OtherCA: filepath.Join(dir, "other-ca.pem"),
	}
	writeCert(t, f.CA, ca.Raw)
	writeCert(t, f.OtherCA, other.Raw)
	f.ServerCert, f.ServerKey = leaf(t, dir, "server", ca, caKey, true)
	f.ClientCert, f.ClientKey = leaf(t, dir, "client", ca, caKey, false)
	f.OtherClientCert, f.OtherClientKey = leaf(t, dir, "other-client", other, otherKey, false)
	return f
}

func authority(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, name)
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func leaf(t testing.TB, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, server bool) (certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, name)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile = filepath.Join(dir, name+".pem")
	keyFile = filepath.Join(dir, name+"-key.pem")
	writeCert(t, certFile, der)
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyFile, "PRIVATE KEY", kb)
	return certFile, keyFile
}

// template is what every certificate here shares: a fresh serial, the common name, valid from
// an hour ago for a day.
func template(t testing.TB, name string) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writeCert(t testing.TB, path string, der []byte) { writePEM(t, path, "CERTIFICATE", der) }

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	// 0644: a Redis container reads the files as its own user.
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
}
