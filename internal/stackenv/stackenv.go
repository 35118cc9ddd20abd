// Package stackenv reads .stack/env, the endpoints of the local real stack
// that hack/stack.sh writes, for the tests (through testenv) and the demo.
package stackenv

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

var (
	loadOnce sync.Once
	loaded   map[string]string
	loadErr  error
)

// envFile finds .stack/env: $SECKILL_STACK_ENV, else the nearest parent
// directory of the working directory that has one.
func envFile() (string, error) {
	if p := os.Getenv("SECKILL_STACK_ENV"); p != "" {
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, ".stack", "env")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no .stack/env found above the working directory: run `make stack-up` (hack/stack.sh up) first")
		}
		dir = parent
	}
}

func load() (map[string]string, error) {
	loadOnce.Do(func() {
		p, err := envFile()
		if err != nil {
			loadErr = err
			return
		}
		f, err := os.Open(p) //nolint:gosec // the stack env file this repository writes
		if err != nil {
			loadErr = fmt.Errorf("opening stack env %s: %w", p, err)
			return
		}
		defer f.Close()
		loaded = map[string]string{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' { // quoted for the shell
				v = v[1 : len(v)-1]
			}
			if ok {
				loaded[k] = v
			}
		}
		loadErr = sc.Err()
	})
	return loaded, loadErr
}

// Lookup returns one endpoint of the stack; an environment variable wins
// over the env file.
func Lookup(key string) (string, error) {
	if v := os.Getenv(key); v != "" {
		return v, nil
	}
	m, err := load()
	if err != nil {
		return "", err
	}
	if v := m[key]; v != "" {
		return v, nil
	}
	return "", fmt.Errorf("stack env has no %s: run `make stack-up` again", key)
}
