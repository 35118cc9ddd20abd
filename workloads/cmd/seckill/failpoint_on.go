//go:build failpoints

package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
)

// failpoint crashes the process at the failpoint named in $SECKILL_FAILPOINTS
// (comma-separated), the way a kill -9 would: no deferred cleanup, no ack.
// With $SECKILL_FAILPOINT_ODDS=n it crashes at one hit in n on average, so a
// process restarted again and again under load (make chaos) also makes
// progress between its crashes. Compiled only with -tags failpoints (
// design.md#failpoints).
var failpoint = func(name string) error {
	for _, fp := range strings.Split(os.Getenv("SECKILL_FAILPOINTS"), ",") {
		if strings.TrimSpace(fp) != name {
			continue
		}
		if n, err := strconv.Atoi(os.Getenv("SECKILL_FAILPOINT_ODDS")); err == nil && n > 1 && rand.IntN(n) != 0 { //nolint:gosec // test odds
			return nil
		}
		fmt.Fprintf(os.Stderr, "failpoint %s: crashing\n", name)
		os.Exit(137)
	}
	return nil
}
