package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// KubernetesAssets is the directory of the stack's Kubernetes binaries
// (envtest's kube-apiserver and etcd), once they exist. `hack/stack.sh up
// --k8s-background` (make test) lets the first build of them run beside the
// tests: the one suite that needs them waits here for that build (its pid
// file, .stack/envtest-build.pid, names a live process), saying every 30 s
// how far it is, up to wait.
func KubernetesAssets(wait time.Duration, logf func(format string, args ...any)) (string, error) {
	assets, err := Lookup("KUBEBUILDER_ASSETS")
	if err != nil {
		return "", err
	}
	pidFile := filepath.Join(filepath.Dir(assets), "envtest-build.pid")
	start, next := time.Now(), time.Now()
	for building(pidFile) {
		if time.Since(start) > wait {
			return "", fmt.Errorf("the Kubernetes build (pid file %s) did not finish within %s", pidFile, wait)
		}
		if !time.Now().Before(next) {
			progress, _ := os.ReadFile(filepath.Join(assets, ".build-progress")) //nolint:gosec // the stack's own file
			logf("waiting for the Kubernetes build that hack/stack.sh started (%s) for %s: %s",
				pidFile, time.Since(start).Round(time.Second), strings.TrimSpace(string(progress)))
			next = time.Now().Add(30 * time.Second)
		}
		time.Sleep(time.Second)
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return "", errors.New("no " + bin + " in " + assets + ": run make stack-up")
		}
	}
	return assets, nil
}

// building: the pid file names a live process.
func building(pidFile string) bool {
	b, err := os.ReadFile(pidFile) //nolint:gosec // the stack's own file
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return false
	}
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie is not building: "pid (comm) Z ...".
	fields := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
