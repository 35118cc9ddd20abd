// Command image writes a container image as a docker-archive tarball
// without a Docker engine or a registry: static files put onto an empty base
// with google/go-containerregistry. `ctr -n k8s.io images import` loads it
// into the node's containerd. The Dockerfile stays the production path.
//
//	go run ./hack/image -out seckill.tar -name localhost/seckill:dev \
//	    -file bin/seckill-operator:/seckill-operator -file bin/seckill:/seckill \
//	    -entrypoint /seckill-operator -user 65532:65532
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(v string) error { *f = append(*f, v); return nil }

func main() {
	var fs files
	out := flag.String("out", "", "the docker-archive tarball to write")
	ref := flag.String("name", "", "image name, e.g. localhost/seckill:dev (CRI normalises other short names to docker.io)")
	entry := flag.String("entrypoint", "", "entrypoint (a path in the image)")
	user := flag.String("user", "65532:65532", "user:group the image runs as")
	flag.Var(&fs, "file", "src:dst — a file put into the image at dst, mode 0755 (repeatable)")
	flag.Parse()
	if err := run(*out, *ref, *entry, *user, fs); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(out, ref, entry, user string, fs files) error {
	if out == "" || ref == "" || len(fs) == 0 {
		return errors.New("-out, -name and at least one -file are required")
	}
	tag, err := name.NewTag(ref, name.WeakValidation)
	if err != nil {
		return fmt.Errorf("-name: %w", err)
	}
	layer, err := layerOf(fs)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()} // reproducible
	cfg.Config.User = user
	cfg.Config.Env = []string{"PATH=/"}
	if entry != "" {
		cfg.Config.Entrypoint = []string{entry}
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	if err := tarball.WriteToFile(out, tag, img); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	d, _ := img.Digest()
	fmt.Printf("%s %s -> %s\n", tag, d, out)
	return nil
}

// layerOf builds one layer holding the files (and /tmp, world-writable).
func layerOf(fs files) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777, ModTime: epoch}); err != nil {
		return nil, err
	}
	for _, f := range fs {
		src, dst, ok := strings.Cut(f, ":")
		if !ok || !path.IsAbs(dst) {
			return nil, fmt.Errorf("-file %q: want src:/absolute/dst", f)
		}
		b, err := os.ReadFile(src) //nolint:gosec // the build names its own files
		if err != nil {
			return nil, err
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(dst, "/"), Mode: 0o755, Size: int64(len(b)), ModTime: epoch}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}
