package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill-operator/workloads/config"
	"github.com/seckill/seckill-operator/workloads/dlq"
	"github.com/seckill/seckill-operator/workloads/logs"
	"github.com/seckill/seckill-operator/workloads/mq"
	"github.com/seckill/seckill-operator/workloads/names"
)

// runDLQReplay sends the dead-lettered messages of a consumer group back to
// its topic (with their original message ids) and prints a JSON report.
func runDLQReplay(ctx context.Context, args []string) error {
	var c config.Common
	fs := flag.NewFlagSet("dlq-replay", flag.ContinueOnError)
	c.Bind(fs)
	group := fs.String("group", "", "consumer group whose DLQ is replayed (required)")
	topic := fs.String("topic", "", "topic to replay to (default: the topic the group consumes)")
	replayer := fs.String("replayer-group", names.GroupDLQReplayer, "group that reads the DLQ (its retry limit must exceed the source group's)")
	messageID := fs.String("message-id", "", "replay only this business message id")
	max := fs.Int("max", 0, "replay at most this many messages (0: all)")
	idle := fs.Duration("idle", 10*time.Second, "stop when the DLQ has been quiet this long")
	deliverAfter := fs.Duration("deliver-after", 0, "send as delayed messages, due after this (for a DELAY topic)")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if err := c.Check(config.Need{RMQ: true}); err != nil {
		return usageError{err}
	}
	if *group == "" {
		return usageError{fmt.Errorf("-group is required")}
	}
	if *topic == "" {
		t, ok := names.TopicOf(*group)
		if !ok {
			return usageError{fmt.Errorf("-topic is required for group %q", *group)}
		}
		*topic = t
		if t == names.TopicOrderCancel && *deliverAfter == 0 {
			*deliverAfter = time.Second // a DELAY topic takes only delayed messages
		}
	}
	if *max < 0 || *idle < time.Second || *deliverAfter < 0 {
		return usageError{fmt.Errorf("-max must be ≥ 0, -idle at least 1s, -deliver-after ≥ 0")}
	}
	log := c.Logger("dlq-replay").With(logs.ConsumerGroup, *group)
	rep := dlq.Report{Replayed: []string{}}
	from, err := mq.NewConsumer(c.RMQEndpoint, *replayer, names.DLQTopic(*group))
	switch {
	case mq.IsTopicNotFound(err):
		log.Info("no DLQ topic: nothing was ever dead-lettered in this group")
	case err != nil:
		return err
	default:
		defer from.Close()
		to, err := mq.NewProducer(c.RMQEndpoint, *topic)
		if err != nil {
			return err
		}
		defer to.Close()
		r := &dlq.Replayer{DLQ: from, To: to, Topic: *topic, DeliverAfter: *deliverAfter, Log: log,
			Replayed: prometheus.NewCounter(prometheus.CounterOpts{Name: "dlq_replayed_total"})}
		if *messageID != "" {
			r.Only = func(d mq.Delivery) bool { return d.MessageID == *messageID }
		}
		if rep, err = r.Replay(ctx, *max, *idle); err != nil {
			return err
		}
	}
	out := struct {
		Group string `json:"group"`
		DLQ   string `json:"dlq"`
		Topic string `json:"topic"`
		dlq.Report
	}{*group, names.DLQTopic(*group), *topic, rep}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	if rep.SendErrors > 0 {
		return fmt.Errorf("%d messages could not be replayed; they stay in %s", rep.SendErrors, names.DLQTopic(*group))
	}
	return nil
}
