package mq

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/seckill/seckill-operator/workloads/names"
	"github.com/seckill/seckill-operator/workloads/tlsca"
)

// The client library speaks TLS to the proxy but, by default, accepts any
// certificate. With a CA (UseCA, or the file $SECKILL_RMQ_CA_FILE names)
// every connection verifies the proxy's certificate against it, for the
// address the client dials: an untrusted or mismatched certificate fails
// the connection, never falls back.

// TLSConfig is the verifying TLS configuration for the PEM authority ca.
func TLSConfig(ca []byte) (*tls.Config, error) {
	return tlsca.Config(ca, "the RocketMQ CA")
}

var (
	tlsMu     sync.Mutex
	tlsSet    bool
	plainDial = rmq.NewRpcClient
)

// UseCA makes every connection of this process to the proxy verify the
// proxy's certificate against ca (PEM). Call it before the first client.
func UseCA(ca []byte) error {
	tc, err := TLSConfig(ca)
	if err != nil {
		return err
	}
	tlsMu.Lock()
	defer tlsMu.Unlock()
	// The library makes one RPC client per proxy address through this
	// hook; each gets the verifying configuration (a copy: gRPC sets the
	// server name per address).
	rmq.NewRpcClient = func(target string, opts ...rmq.RpcClientOption) (rmq.RpcClient, error) {
		return plainDial(target, append([]rmq.RpcClientOption{rmq.WithRpcClientConnOption(rmq.WithTLSConfig(tc.Clone()))}, opts...)...)
	}
	tlsSet = true
	return nil
}

// caFromEnv applies $SECKILL_RMQ_CA_FILE once, unless UseCA was called.
func caFromEnv() error {
	tlsMu.Lock()
	done := tlsSet
	tlsMu.Unlock()
	path := os.Getenv(names.EnvRMQCAFile)
	if done || path == "" {
		return nil
	}
	ca, err := os.ReadFile(path) //nolint:gosec // the mounted CA the operator names
	if err != nil {
		return fmt.Errorf("reading the RocketMQ CA ($%s): %w", names.EnvRMQCAFile, err)
	}
	return UseCA(ca)
}
