package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	seckillv1alpha1 "github.com/seckill/seckill-operator/api/v1alpha1"
	"github.com/seckill/seckill-operator/workloads/mq/admin"
	"github.com/seckill/seckill-operator/workloads/names"
)

// ReasonRocketMQAdmin: the activity's own topics and groups could not be
// created (or deleted) through the name server and the brokers.
const ReasonRocketMQAdmin = "RocketMQAdminFailed"

// ReasonRocketMQAuth: the broker refused spec.connections.
// rocketMQCredentials (an unknown user, a wrong secret, or no right).
const ReasonRocketMQAuth = "RocketMQAuthFailed"

// messagingRecheck is how often the operator makes sure again that an
// activity's topics and groups exist (a broker whose store was lost).
const messagingRecheck = 10 * time.Minute

// The steps of doneCache this file records.
const (
	stepMessaging = "messaging"
	stepLogin     = "rocketmq-login"
	stepTLS       = "rocketmq-tls"
)

// checkRocketMQTLSOnce is checkRocketMQTLS, again only when the endpoint or
// the CA change, or messagingRecheck after it last verified.
func (r *SeckillActivityReconciler) checkRocketMQTLSOnce(ctx context.Context, act *seckillv1alpha1.SeckillActivity, e Endpoints) error {
	inputs := stepInputs(e.RocketMQEndpoint, string(e.RocketMQCA))
	if r.done.fresh(act.UID, stepTLS, inputs, r.now(), messagingRecheck) {
		return nil
	}
	verified, err := checkRocketMQTLS(ctx, e)
	if verified {
		r.done.done(act.UID, stepTLS, inputs, r.now())
	}
	return err
}

// messagingID names an activity's topics and groups: a digest of the
// activity object's UID (a re-created activity gets new ones).
func messagingID(act *seckillv1alpha1.SeckillActivity) string {
	h := sha256.Sum256([]byte(act.UID))
	return hex.EncodeToString(h[:5])
}

// messaging is the topics and groups act's workloads use: its own when the
// manifest names a name server, else the shared ones.
func messaging(act *seckillv1alpha1.SeckillActivity) names.Messaging {
	if act.Spec.Connections.RocketMQNameServerSecret == nil {
		return names.Shared()
	}
	return names.ForActivity(messagingID(act))
}

func messagingTopics(m names.Messaging) []admin.Topic {
	return []admin.Topic{{Name: m.CreateTopic, Type: admin.Normal}, {Name: m.EventsTopic, Type: admin.Normal}, {Name: m.CancelTopic, Type: admin.Delay}}
}

func messagingGroups(m names.Messaging) []admin.Group {
	return []admin.Group{{Name: m.ConsumerGroup, RetryMaxTimes: names.RetryLimit}, {Name: m.ProjectorGroup, RetryMaxTimes: names.RetryLimit},
		{Name: m.CancellerGroup, RetryMaxTimes: names.RetryLimit}, {Name: m.ReplayerGroup, RetryMaxTimes: names.ReplayerRetryLimit}}
}

// ensureMessaging creates act's own topics and groups (idempotent: a
// create of what exists changes nothing) before its workloads run; this
// process repeats it at most every messagingRecheck.
func (r *SeckillActivityReconciler) ensureMessaging(ctx context.Context, act *seckillv1alpha1.SeckillActivity, e Endpoints) error {
	if e.RocketMQNameServer == "" {
		return nil
	}
	if r.done.fresh(act.UID, stepMessaging, e.RocketMQNameServer, r.now(), messagingRecheck) {
		return nil
	}
	c := adminClient(e)
	m := messaging(act)
	for _, t := range messagingTopics(m) {
		if err := c.CreateTopic(ctx, t); err != nil {
			return adminError(fmt.Errorf("the activity's topic %s: %w", t.Name, err))
		}
	}
	for _, g := range messagingGroups(m) {
		if err := c.CreateGroup(ctx, g); err != nil {
			return adminError(fmt.Errorf("the activity's consumer group %s: %w", g.Name, err))
		}
	}
	r.done.done(act.UID, stepMessaging, e.RocketMQNameServer, r.now())
	return nil
}

// checkRocketMQLogin checks the activity's ACL user with the proxy, again
// at most every messagingRecheck once accepted (or when the user or its
// secret change).
func (r *SeckillActivityReconciler) checkRocketMQLogin(ctx context.Context, act *seckillv1alpha1.SeckillActivity, e Endpoints) error {
	if e.RocketMQAccessKey == "" {
		return nil
	}
	inputs := stepInputs(e.RocketMQEndpoint, e.RocketMQAccessKey, e.RocketMQSecretKey)
	if r.done.fresh(act.UID, stepLogin, inputs, r.now(), messagingRecheck) {
		return nil
	}
	if err := proxyLogin(ctx, e, messaging(act).CreateTopic); err != nil {
		return err
	}
	r.done.done(act.UID, stepLogin, inputs, r.now())
	return nil
}

// adminClient reaches e's name server and brokers as e's ACL user.
func adminClient(e Endpoints) *admin.Client {
	return &admin.Client{NameServer: e.RocketMQNameServer, Timeout: 10 * time.Second,
		AccessKey: e.RocketMQAccessKey, SecretKey: e.RocketMQSecretKey}
}

// adminError: a refused login or right is RocketMQAuthFailed, the rest
// RocketMQAdminFailed.
func adminError(err error) error {
	if admin.IsAuthError(err) {
		return &connError{ReasonRocketMQAuth, fmt.Errorf("the broker refused the RocketMQ credentials: %w", err)}
	}
	return &connError{ReasonRocketMQAdmin, err}
}

// deleteMessaging removes act's own topics and groups (after its archive:
// nothing is sent or consumed any more). Messages still on them go with
// them; PostgreSQL keeps every order and event.
func (r *SeckillActivityReconciler) deleteMessaging(ctx context.Context, act *seckillv1alpha1.SeckillActivity, e Endpoints) error {
	if e.RocketMQNameServer == "" {
		return nil
	}
	c := adminClient(e)
	m := messaging(act)
	var errs []error
	for _, t := range messagingTopics(m) {
		errs = append(errs, c.DeleteTopic(ctx, t.Name))
	}
	for _, g := range messagingGroups(m) {
		errs = append(errs, c.DeleteGroup(ctx, g.Name))
	}
	r.done.drop(act.UID, stepMessaging)
	return errors.Join(errs...)
}
