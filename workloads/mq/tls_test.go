package mq_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill-operator/internal/testenv"
	"github.com/seckill/seckill-operator/workloads/mq"
)

// The stack's proxy presents a certificate of the stack's CA: the clients'
// verifying configuration accepts it for the address they dial, and refuses
// it under any other authority (the library's default accepts anything).
func TestProxyCertificateIsVerified(t *testing.T) {
	endpoint := testenv.Get(t, "SECKILL_RMQ_ENDPOINT")
	ca, err := os.ReadFile(testenv.Get(t, "SECKILL_RMQ_CA_FILE"))
	require.NoError(t, err)
	host, _, err := net.SplitHostPort(endpoint)
	require.NoError(t, err)
	handshake := func(pemCA []byte) error {
		tc, err := mq.TLSConfig(pemCA)
		require.NoError(t, err)
		tc.ServerName, tc.NextProtos = host, []string{"h2"}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", endpoint, tc)
		if err == nil {
			_ = conn.Close()
		}
		return err
	}
	require.NoError(t, handshake(ca), "the stack's CA signed the proxy's certificate")
	err = handshake(testenv.ForeignCA(t))
	var unknown x509.UnknownAuthorityError
	var verify *tls.CertificateVerificationError
	require.True(t, errors.As(err, &unknown) || errors.As(err, &verify), "want a verification error, got %v", err)
	_, err = mq.TLSConfig([]byte("not a certificate"))
	require.Error(t, err)
}
