// Package admin creates RocketMQ topics and consumer groups through the
// name server and the brokers' remoting protocol — what mqadmin does, for a
// process that has no JVM (the operator creates each activity's own topics
// and groups with it).
//
// The protocol: every command is a frame
//
//	[4: length of what follows][1: serialisation (0 = JSON) | 3: header length][header JSON][body]
//
// whose header names a request code, an opaque id the response repeats,
// and string-valued extFields; a response carries flag bit 0 and code 0 on
// success, else the broker's code and remark. Each call here opens its own
// connection: admin calls are rare and a connection is never shared by two
// of them.
//
// Why not rocketmq-client-go/v2's admin (checked at
// v2.1.3-0.20251226070945-2173d070fd1b, the version the module proxy
// serves): its CreateTopic sends no topic attributes, and RocketMQ 5 needs
// "+message.type=DELAY" or "FIFO" on the timer and create topics (a
// NORMAL topic refuses a delayed message); it cannot create or delete a
// subscription group (it only lists them), which the operator does for
// every activity; and with TLS on it dials with InsecureSkipVerify, which
// our rule that every connection is authenticated forbids. It would also
// add the v2 remoting client's goroutines and logger to the operator for
// nine request codes. What this package speaks is the same frame both use,
// with HMAC-SHA1 ACL signing as the broker expects (sign, below).
package admin

import (
	"context"
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // RocketMQ's ACL signs with HMAC-SHA1
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"sort"
	"strconv"
	"sync/atomic"
	"time"
)

// Request codes (RocketMQ's RequestCode).
const (
	codeUpdateAndCreateTopic = 17
	codeGetAllTopicConfig    = 21
	codeGetRouteInfoByTopic  = 105
	codeGetBrokerClusterInfo = 106
	codeUpdateAndCreateGroup = 200
	codeGetAllGroupConfig    = 201
	codeDeleteGroup          = 207
	codeDeleteTopicInBroker  = 215
	codeDeleteTopicInNamesrv = 216
)

// Response codes.
const (
	codeSuccess       = 0
	codeTopicNotExist = 17
)

// maxFrame bounds a response (a cluster's whole group table fits easily).
const maxFrame = 64 << 20

// Client talks to one name server and, through what it reports, to the
// brokers.
type Client struct {
	// NameServer is host:port of a name server.
	NameServer string
	// Timeout bounds each call (default 10 s) when ctx has no deadline.
	Timeout time.Duration
	// BrokerAddr, when set, maps the address a broker registered to the
	// address to dial (e.g. a broker registered as 127.0.0.1 reached over a
	// bridge): the name server reports what the broker says of itself.
	BrokerAddr func(registered string) string
	// AccessKey and SecretKey sign every request (RocketMQ ACL): the
	// broker authenticates the signature and authorizes the user.
	AccessKey, SecretKey string
}

var opaque atomic.Int32

// Error is a refusal by the name server or a broker.
type Error struct {
	Addr   string
	Code   int
	Remark string
}

func (e *Error) Error() string {
	return fmt.Sprintf("rocketmq %s answered code %d: %s", e.Addr, e.Code, e.Remark)
}

type header struct {
	Code      int               `json:"code"`
	Language  string            `json:"language"`
	Version   int               `json:"version"`
	Opaque    int32             `json:"opaque"`
	Flag      int               `json:"flag"`
	Remark    string            `json:"remark,omitempty"`
	ExtFields map[string]string `json:"extFields,omitempty"`
}

// call sends one request to addr and returns the response's body.
func (c *Client) call(ctx context.Context, addr string, code int, ext map[string]string, body []byte) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		t := c.Timeout
		if t <= 0 {
			t = 10 * time.Second
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dialling rocketmq %s: %w", addr, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()

	req := header{Code: code, Language: "GO", Version: 500, Opaque: opaque.Add(1), ExtFields: c.sign(ext, body)}
	if err := writeFrame(conn, req, body); err != nil {
		return nil, fmt.Errorf("rocketmq %s request %d: %w", addr, code, err)
	}
	res, resBody, err := readFrame(conn)
	if err != nil {
		return nil, fmt.Errorf("rocketmq %s request %d: %w", addr, code, err)
	}
	if res.Flag&1 == 0 || res.Opaque != req.Opaque {
		return nil, fmt.Errorf("rocketmq %s request %d: not the response to it (flag %d, opaque %d)", addr, code, res.Flag, res.Opaque)
	}
	if res.Code != codeSuccess {
		return nil, &Error{Addr: addr, Code: res.Code, Remark: res.Remark}
	}
	return resBody, nil
}

// sign adds the ACL fields to a copy of ext: AccessKey, and Signature, the
// base64 HMAC-SHA1 under the secret key of every other field's value in
// the order of their names, then the body (what the broker recomputes).
func (c *Client) sign(ext map[string]string, body []byte) map[string]string {
	if c.AccessKey == "" {
		return ext
	}
	out := make(map[string]string, len(ext)+2)
	for k, v := range ext {
		out[k] = v
	}
	out[fieldAccessKey] = c.AccessKey
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	mac := hmac.New(sha1.New, []byte(c.SecretKey))
	for _, k := range keys {
		mac.Write([]byte(out[k]))
	}
	mac.Write(body)
	out[fieldSignature] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
	return out
}

// The ACL's extFields.
const (
	fieldAccessKey = "AccessKey"
	fieldSignature = "Signature"
)

// Response codes of a refused login or right (ResponseCode).
const (
	codeNoPermission = 16
)

// IsAuthError tells a request the broker refused for its credentials or
// the user's rights (not an outage).
func IsAuthError(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == codeNoPermission
}

func writeFrame(w io.Writer, h header, body []byte) error {
	hb, err := json.Marshal(h)
	if err != nil {
		return err
	}
	frame := make([]byte, 8, 8+len(hb)+len(body))
	binary.BigEndian.PutUint32(frame[0:4], uint32(4+len(hb)+len(body))) //nolint:gosec // bounded by maxFrame in practice
	binary.BigEndian.PutUint32(frame[4:8], uint32(len(hb)))             //nolint:gosec // serialisation 0 (JSON) in the top byte
	frame = append(append(frame, hb...), body...)
	_, err = w.Write(frame)
	return err
}

func readFrame(r io.Reader) (header, []byte, error) {
	var h header
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return h, nil, err
	}
	total := binary.BigEndian.Uint32(pre[0:4])
	mark := binary.BigEndian.Uint32(pre[4:8])
	if mark>>24 != 0 {
		return h, nil, fmt.Errorf("header serialised as %d, not JSON", mark>>24)
	}
	hlen := mark & 0xFFFFFF
	if total > maxFrame || hlen+4 > total {
		return h, nil, fmt.Errorf("bad frame: length %d, header %d", total, hlen)
	}
	rest := make([]byte, total-4)
	if _, err := io.ReadFull(r, rest); err != nil {
		return h, nil, err
	}
	if err := json.Unmarshal(rest[:hlen], &h); err != nil {
		return h, nil, fmt.Errorf("response header: %w", err)
	}
	return h, rest[hlen:], nil
}

// intKeys matches an object key written as a bare integer: RocketMQ's
// fastjson writes maps keyed by numbers ({0:"host:port"}), which is not
// JSON. Only a key position qualifies ('{' or ',' before it, ':' after).
var intKeys = regexp.MustCompile(`([{,])(-?[0-9]+):`)

func decode(body []byte, v any) error {
	if err := json.Unmarshal(intKeys.ReplaceAll(body, []byte(`$1"$2":`)), v); err != nil {
		return fmt.Errorf("decoding %q: %w", truncate(body), err)
	}
	return nil
}

func truncate(b []byte) []byte {
	if len(b) > 200 {
		return append(b[:200:200], "..."...)
	}
	return b
}

// Broker is a broker set: its name, cluster and the master's address.
type Broker struct {
	Name    string
	Cluster string
	Master  string
}

// Brokers lists the broker sets the name server knows, with their masters
// (a set without a master is left out: nothing can be created on it).
func (c *Client) Brokers(ctx context.Context) ([]Broker, error) {
	body, err := c.call(ctx, c.NameServer, codeGetBrokerClusterInfo, nil, nil)
	if err != nil {
		return nil, err
	}
	var info struct {
		BrokerAddrTable map[string]struct {
			Cluster     string            `json:"cluster"`
			BrokerName  string            `json:"brokerName"`
			BrokerAddrs map[string]string `json:"brokerAddrs"`
		} `json:"brokerAddrTable"`
	}
	if err := decode(body, &info); err != nil {
		return nil, err
	}
	var out []Broker
	for name, b := range info.BrokerAddrTable {
		if addr := b.BrokerAddrs["0"]; addr != "" {
			out = append(out, Broker{Name: name, Cluster: b.Cluster, Master: c.dialAddr(addr)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) == 0 {
		return nil, fmt.Errorf("name server %s knows no broker with a master", c.NameServer)
	}
	return out, nil
}

func (c *Client) dialAddr(registered string) string {
	if c.BrokerAddr != nil {
		return c.BrokerAddr(registered)
	}
	return registered
}

// MessageType is a RocketMQ 5 topic's message type.
type MessageType string

// Message types.
const (
	Normal MessageType = "NORMAL"
	Delay  MessageType = "DELAY"
	FIFO   MessageType = "FIFO"
)

// Topic is a topic to create.
type Topic struct {
	Name   string
	Type   MessageType
	Queues int // read and write queues per broker (default 4)
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_%|-]{1,127}$`)

// CheckName refuses a name RocketMQ would refuse (its topic and group
// rule: letters, digits, '%', '|', '-', '_'; at most 127 characters).
func CheckName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("rocketmq name %q: letters, digits, %%, |, - and _ only, 1-127 characters", name)
	}
	return nil
}

// CreateTopic creates t, or updates it to t, on every master.
func (c *Client) CreateTopic(ctx context.Context, t Topic) error {
	if err := CheckName(t.Name); err != nil {
		return err
	}
	switch t.Type {
	case Normal, Delay, FIFO:
	default:
		return fmt.Errorf("topic %s: unknown message type %q", t.Name, t.Type)
	}
	queues := t.Queues
	if queues < 1 {
		queues = 4
	}
	brokers, err := c.Brokers(ctx)
	if err != nil {
		return err
	}
	ext := map[string]string{
		"topic": t.Name, "defaultTopic": "TBW102", "readQueueNums": strconv.Itoa(queues), "writeQueueNums": strconv.Itoa(queues),
		"perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": strconv.FormatBool(t.Type == FIFO),
		"attributes": "+message.type=" + string(t.Type),
	}
	for _, b := range brokers {
		if _, err := c.call(ctx, b.Master, codeUpdateAndCreateTopic, ext, nil); err != nil {
			return fmt.Errorf("creating topic %s on %s: %w", t.Name, b.Name, err)
		}
	}
	return nil
}

// Group is a consumer group to create.
type Group struct {
	Name string
	// RetryMaxTimes is how many times a message is delivered again before
	// it goes to the group's dead-letter topic.
	RetryMaxTimes int
}

type groupConfig struct {
	GroupName                      string `json:"groupName"`
	ConsumeEnable                  bool   `json:"consumeEnable"`
	ConsumeFromMinEnable           bool   `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         bool   `json:"consumeBroadcastEnable"`
	RetryQueueNums                 int    `json:"retryQueueNums"`
	RetryMaxTimes                  int    `json:"retryMaxTimes"`
	BrokerID                       int    `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   int    `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIdsChangedEnable bool   `json:"notifyConsumerIdsChangedEnable"`
	GroupSysFlag                   int    `json:"groupSysFlag"`
	ConsumeTimeoutMinute           int    `json:"consumeTimeoutMinute"`
}

// CreateGroup creates g, or updates it to g, on every master.
func (c *Client) CreateGroup(ctx context.Context, g Group) error {
	if err := CheckName(g.Name); err != nil {
		return err
	}
	if g.RetryMaxTimes < 0 {
		return fmt.Errorf("group %s: negative retryMaxTimes", g.Name)
	}
	body, err := json.Marshal(groupConfig{GroupName: g.Name, ConsumeEnable: true, ConsumeFromMinEnable: true, ConsumeBroadcastEnable: true,
		RetryQueueNums: 1, RetryMaxTimes: g.RetryMaxTimes, WhichBrokerWhenConsumeSlowly: 1, NotifyConsumerIdsChangedEnable: true, ConsumeTimeoutMinute: 15})
	if err != nil {
		return err
	}
	brokers, err := c.Brokers(ctx)
	if err != nil {
		return err
	}
	for _, b := range brokers {
		if _, err := c.call(ctx, b.Master, codeUpdateAndCreateGroup, nil, body); err != nil {
			return fmt.Errorf("creating group %s on %s: %w", g.Name, b.Name, err)
		}
	}
	return nil
}

// Groups reads the consumer groups of every master, with their retry limits.
func (c *Client) Groups(ctx context.Context) (map[string]Group, error) {
	brokers, err := c.Brokers(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]Group{}
	for _, b := range brokers {
		body, err := c.call(ctx, b.Master, codeGetAllGroupConfig, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("reading the groups of %s: %w", b.Name, err)
		}
		var w struct {
			Table map[string]groupConfig `json:"subscriptionGroupTable"`
		}
		if err := decode(body, &w); err != nil {
			return nil, err
		}
		for name, g := range w.Table {
			out[name] = Group{Name: name, RetryMaxTimes: g.RetryMaxTimes}
		}
	}
	return out, nil
}

// Topics reads the topics of every master with their message types and
// queue counts (a topic on several masters: the last one read).
func (c *Client) Topics(ctx context.Context) (map[string]Topic, error) {
	brokers, err := c.Brokers(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]Topic{}
	for _, b := range brokers {
		body, err := c.call(ctx, b.Master, codeGetAllTopicConfig, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("reading the topics of %s: %w", b.Name, err)
		}
		var w struct {
			Table map[string]struct {
				WriteQueueNums int               `json:"writeQueueNums"`
				Attributes     map[string]string `json:"attributes"`
			} `json:"topicConfigTable"`
		}
		if err := decode(body, &w); err != nil {
			return nil, err
		}
		for name, t := range w.Table {
			typ := MessageType(t.Attributes["message.type"])
			if typ == "" {
				typ = Normal
			}
			out[name] = Topic{Name: name, Type: typ, Queues: t.WriteQueueNums}
		}
	}
	return out, nil
}

// TopicExists reports whether the name server has a route for topic.
func (c *Client) TopicExists(ctx context.Context, topic string) (bool, error) {
	_, err := c.call(ctx, c.NameServer, codeGetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
	var e *Error
	if errors.As(err, &e) && e.Code == codeTopicNotExist {
		return false, nil
	}
	return err == nil, err
}

// DeleteTopic removes topic from every master and from the name server
// (a topic that does not exist is no error).
func (c *Client) DeleteTopic(ctx context.Context, topic string) error {
	if err := CheckName(topic); err != nil {
		return err
	}
	brokers, err := c.Brokers(ctx)
	if err != nil {
		return err
	}
	ext := map[string]string{"topic": topic}
	for _, b := range brokers {
		if _, err := c.call(ctx, b.Master, codeDeleteTopicInBroker, ext, nil); err != nil {
			return fmt.Errorf("deleting topic %s on %s: %w", topic, b.Name, err)
		}
	}
	if _, err := c.call(ctx, c.NameServer, codeDeleteTopicInNamesrv, ext, nil); err != nil {
		return fmt.Errorf("deleting topic %s's route: %w", topic, err)
	}
	return nil
}

// DeleteGroup removes group (and its retry and dead-letter state) from
// every master.
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	if err := CheckName(group); err != nil {
		return err
	}
	brokers, err := c.Brokers(ctx)
	if err != nil {
		return err
	}
	for _, b := range brokers {
		if _, err := c.call(ctx, b.Master, codeDeleteGroup, map[string]string{"groupName": group, "cleanOffset": "true"}, nil); err != nil {
			return fmt.Errorf("deleting group %s on %s: %w", group, b.Name, err)
		}
	}
	return nil
}
