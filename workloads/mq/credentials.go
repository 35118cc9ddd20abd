package mq

import (
	"os"
	"sync"

	"github.com/apache/rocketmq-clients/golang/v5/credentials"

	"github.com/seckill/seckill-operator/workloads/names"
)

// The broker's ACL (2.0) authenticates every client: each request carries
// the access key and an HMAC of it under the secret key. UseCredentials (or
// $SECKILL_RMQ_ACCESS_KEY and $SECKILL_RMQ_SECRET_KEY) sets them for every
// client of this process; without them requests go unsigned, which a broker
// with ACLs refuses.

var (
	credMu  sync.Mutex
	credSet *credentials.SessionCredentials
)

// UseCredentials makes every later client of this process sign its
// requests as accessKey.
func UseCredentials(accessKey, secretKey string) {
	credMu.Lock()
	defer credMu.Unlock()
	credSet = &credentials.SessionCredentials{AccessKey: accessKey, AccessSecret: secretKey}
}

// sessionCredentials are UseCredentials' or, else, the environment's.
func sessionCredentials() *credentials.SessionCredentials {
	credMu.Lock()
	defer credMu.Unlock()
	if credSet != nil {
		c := *credSet
		return &c
	}
	return &credentials.SessionCredentials{AccessKey: os.Getenv(names.EnvRMQAccessKey), AccessSecret: os.Getenv(names.EnvRMQSecretKey)}
}
