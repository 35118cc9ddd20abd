package testenv

import "go.uber.org/goleak"

// LeakOptions are goleak's options for this repository's packages: every
// goroutine must have ended when a package's tests end, except those the
// RocketMQ 5 Go client keeps for the life of the process — its client
// manager, sessions and tickers are process-wide and outlive
// GracefulStop (apache/rocketmq-clients issue 610 and its kin), with their
// gRPC connections and the client's log roller. Everything of ours is
// checked.
func LeakOptions() []goleak.Option {
	var opts []goleak.Option
	for _, f := range []string{
		"github.com/apache/rocketmq-clients/golang/v5/pkg/ticker.Tick.func1",
		"github.com/apache/rocketmq-clients/golang/v5.(*defaultClientManager).startUp.func1",
		"github.com/apache/rocketmq-clients/golang/v5.(*defaultClientManager).startUp.func2",
		"github.com/apache/rocketmq-clients/golang/v5.(*defaultClientManager).startUp.func3",
		"github.com/apache/rocketmq-clients/golang/v5.(*defaultClientManager).startUp.func4",
		"github.com/apache/rocketmq-clients/golang/v5.(*defaultClientSession).startUp.func1",
		"google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run",
		"google.golang.org/grpc/internal/transport.(*http2Client).reader",
		"google.golang.org/grpc/internal/transport.(*loopyWriter).run",
		"google.golang.org/grpc/internal/transport.newHTTP2Client.func6",
		"google.golang.org/grpc.newClientStreamWithParams.func4",
		"github.com/natefinch/lumberjack.(*Logger).millRun",
		"go.opencensus.io/stats/view.(*worker).start",
	} {
		opts = append(opts, goleak.IgnoreAnyFunction(f))
	}
	return opts
}
