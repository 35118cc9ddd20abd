//go:build failpoints

package main

import (
	"fmt"
	"os"
	"strings"
)

// failpoint crashes the process at the failpoint named in $SECKILL_FAILPOINTS
// (comma-separated), the way a kill -9 would: no deferred cleanup, no ack.
// Compiled only with -tags failpoints (seed §13.3).
var failpoint = func(name string) error {
	for _, fp := range strings.Split(os.Getenv("SECKILL_FAILPOINTS"), ",") {
		if strings.TrimSpace(fp) == name {
			fmt.Fprintf(os.Stderr, "failpoint %s: crashing\n", name)
			os.Exit(137)
		}
	}
	return nil
}
