package mq

import (
	"context"
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // RocketMQ's ACL signs with HMAC-SHA1
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

// ErrLoginRefused is a request the proxy refused for its credentials: an
// unknown user, a wrong secret, or a user without the right.
var ErrLoginRefused = errors.New("the RocketMQ proxy refused the credentials")

// CheckLogin asks the proxy at endpoint for topic's route as accessKey, the
// way every client starts, over TLS verified with tc (nil: the client
// library's default, TLS that accepts any certificate, as the workloads do
// without a CA). A refused login is ErrLoginRefused; anything else the
// proxy answers (the topic missing included) means the login was accepted.
// A proxy that cannot be reached is not judged: the error says so and is
// not ErrLoginRefused.
func CheckLogin(ctx context.Context, endpoint string, tc *tls.Config, accessKey, secretKey, topic string) error {
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		return fmt.Errorf("the RocketMQ endpoint %q: %w", endpoint, err)
	}
	if tc == nil {
		tc = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // the workloads' own default without a CA
	} else {
		tc = tc.Clone()
		tc.ServerName = host
	}
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		return fmt.Errorf("dialling the RocketMQ proxy: %w", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	now := time.Now().UTC().Format("20060102T150405Z")
	mac := hmac.New(sha1.New, []byte(secretKey))
	mac.Write([]byte(now))
	ctx = metadata.AppendToOutgoingContext(ctx, "x-mq-language", "GO", "x-mq-protocol", "v2", "x-mq-date-time", now,
		"x-mq-client-id", "seckill-operator-login-check",
		"authorization", fmt.Sprintf("MQv2-HMAC-SHA1 Credential=%s//Rocketmq, SignedHeaders=x-mq-date-time, Signature=%s", accessKey, hex.EncodeToString(mac.Sum(nil))))
	var p int32
	_, _ = fmt.Sscan(port, &p)
	res, err := v2.NewMessagingServiceClient(conn).QueryRoute(ctx, &v2.QueryRouteRequest{
		Topic:     &v2.Resource{Name: topic},
		Endpoints: &v2.Endpoints{Scheme: v2.AddressScheme_IPv4, Addresses: []*v2.Address{{Host: host, Port: p}}},
	})
	if err != nil {
		return fmt.Errorf("asking the RocketMQ proxy for a route: %w", err)
	}
	switch c := res.GetStatus().GetCode(); c {
	case v2.Code_UNAUTHORIZED, v2.Code_FORBIDDEN:
		return fmt.Errorf("%w: %s (%s)", ErrLoginRefused, c, res.GetStatus().GetMessage())
	}
	return nil
}
