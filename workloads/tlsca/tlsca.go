// Package tlsca turns a PEM certificate authority (a mounted Secret, a file
// the stack generates) into the verifying TLS configuration every client of
// the workloads uses: the server's certificate must chain to that authority
// and name the address dialled. Nothing here ever skips verification.
package tlsca

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// Pool parses ca (PEM) into a certificate pool; what names the authority in
// the error ("the Redis CA").
func Pool(ca []byte, what string) (*x509.CertPool, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s holds no PEM certificate", what)
	}
	return roots, nil
}

// Config is a client configuration that trusts only ca, TLS 1.2 or newer.
// The server name is left empty: each client library sets it per address.
func Config(ca []byte, what string) (*tls.Config, error) {
	roots, err := Pool(ca, what)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}

// ReadFile reads a PEM authority from path and checks that it parses.
func ReadFile(path, what string) ([]byte, error) {
	ca, err := os.ReadFile(path) //nolint:gosec // a CA file the operator mounts or the stack writes
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	if _, err := Pool(ca, what); err != nil {
		return nil, fmt.Errorf("%s (%s): %w", what, path, err)
	}
	return ca, nil
}
