package tlsca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func selfSigned(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestConfig(t *testing.T) {
	ca := selfSigned(t)
	tc, err := Config(ca, "the Redis CA")
	require.NoError(t, err)
	require.False(t, tc.InsecureSkipVerify)
	require.Equal(t, uint16(tls.VersionTLS12), tc.MinVersion)
	require.NotNil(t, tc.RootCAs)

	for name, bad := range map[string][]byte{"empty": nil, "not PEM": []byte("placeholder"),
		"a key": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")})} {
		t.Run(name, func(t *testing.T) {
			_, err := Config(bad, "the Redis CA")
			require.ErrorContains(t, err, "the Redis CA holds no PEM certificate")
		})
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(good, selfSigned(t), 0o600))
	ca, err := ReadFile(good, "the Redis CA")
	require.NoError(t, err)
	require.NotEmpty(t, ca)

	_, err = ReadFile(filepath.Join(dir, "missing"), "the Redis CA")
	require.ErrorContains(t, err, "reading the Redis CA")
	bad := filepath.Join(dir, "bad.crt")
	require.NoError(t, os.WriteFile(bad, []byte("x"), 0o600))
	_, err = ReadFile(bad, "the Redis CA")
	require.ErrorContains(t, err, "holds no PEM certificate")
}
