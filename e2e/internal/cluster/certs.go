package cluster

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the cluster's certificate authority and every key pair signed by it.
// The API server trusts client certs from the CA: admin and the kubelet
// authenticate with their Organization (group) and CommonName (user).
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  *rsa.PrivateKey
}

type certSpec struct {
	name     string
	subject  pkix.Name
	server   bool
	dnsNames []string
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// writePKI creates the CA, the serving and client certs, and the service
// account signing key in dir.
func writePKI(dir, nodeName string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create cert dir %s: %w", dir, err)
	}
	p := &pki{dir: dir}
	if err := p.writeCA(); err != nil {
		return nil, err
	}
	specs := []certSpec{
		{name: "apiserver", subject: pkix.Name{CommonName: "kube-apiserver"}, server: true,
			dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}},
		{name: "admin", subject: pkix.Name{CommonName: "volrecon-e2e-admin", Organization: []string{"system:masters"}}},
		{name: "apiserver-kubelet-client", subject: pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}}},
		{name: "kubelet-client", subject: pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}}},
		{name: "kubelet-serving", subject: pkix.Name{CommonName: nodeName}, server: true, dnsNames: []string{"localhost", nodeName}},
	}
	for _, s := range specs {
		if err := p.writeSigned(s); err != nil {
			return nil, err
		}
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate service account key: %w", err)
	}
	if err := writeKey(p.path("sa.key"), saKey); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("marshal service account public key: %w", err)
	}
	return p, writePEM(p.path("sa.pub"), "PUBLIC KEY", pub)
}

func (p *pki) writeCA() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "volrecon-e2e-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("create CA cert: %w", err)
	}
	if p.caCert, err = x509.ParseCertificate(der); err != nil {
		return fmt.Errorf("parse CA cert: %w", err)
	}
	p.caKey = key
	if err := writePEM(p.path("ca.crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writeKey(p.path("ca.key"), key)
}

var serial int64 = 1

func (p *pki) writeSigned(s certSpec) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate key %s: %w", s.name, err)
	}
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      s.subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if s.server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = s.dnsNames
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return fmt.Errorf("sign cert %s: %w", s.name, err)
	}
	if err := writePEM(p.path(s.name+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writeKey(p.path(s.name+".key"), key)
}

func writeKey(path string, key *rsa.PrivateKey) error {
	return writePEM(path, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))
}

func writePEM(path, blockType string, der []byte) error {
	data := pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeKubeconfig writes a kubeconfig for the API server on 127.0.0.1 that
// authenticates with the client cert <certName>.crt.
func (p *pki) writeKubeconfig(path, certName string) error {
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:%d
    certificate-authority: %s
users:
- name: u
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: e2e
  context: {cluster: e2e, user: u}
current-context: e2e
`, APIServerPort, p.path("ca.crt"), p.path(certName+".crt"), p.path(certName+".key"))
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
