// Command kubectl-seckill is the kubectl plugin `kubectl seckill`
// (internal/kubectlseckill): put it on the PATH and kubectl finds it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/seckill/seckill-operator/internal/kubectlseckill"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := kubectlseckill.Main(ctx, os.Args[1:], os.Stdout)
	stop()
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "kubectl seckill:", err)
	var usage kubectlseckill.UsageError
	if errors.As(err, &usage) {
		fmt.Fprint(os.Stderr, "\n"+kubectlseckill.Usage)
		os.Exit(2)
	}
	os.Exit(1)
}
