package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// resolveImage finds the image of a resource: a kernel directory or a
// disk image file (whose format qemu-img reports).
func resolveImage(ctx context.Context, cfg Config, image string) (Image, error) {
	path := image
	if !filepath.IsAbs(path) {
		path = filepath.Join(cfg.ImagesDir, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return Image{}, status.Errorf(codes.FailedPrecondition, "provider libvirt: image %q does not exist on this node (%v)", image, err)
	}
	if !fi.IsDir() {
		format, size, err := diskInfo(ctx, cfg.QemuImg, path)
		if err != nil {
			return Image{}, status.Errorf(codes.FailedPrecondition, "provider libvirt: image %q is not a disk image qemu-img reads: %v", image, err)
		}
		return Image{Disk: path, DiskFormat: format, DiskBytes: size}, nil
	}
	img := Image{}
	img.Kernel = firstFile(path, "vmlinux", "vmlinuz", "kernel", "bzImage")
	img.Initrd = firstFile(path, "initrd.gz", "initrd.img", "initrd", "initramfs.cpio.gz")
	if img.Kernel == "" {
		return Image{}, status.Errorf(codes.FailedPrecondition, "provider libvirt: image %q is a directory without a kernel (vmlinux, vmlinuz, kernel or bzImage)", image)
	}
	if b, err := os.ReadFile(filepath.Join(path, "cmdline")); err == nil {
		img.Cmdline = strings.TrimSpace(string(b))
	}
	return img, nil
}

func firstFile(dir string, names ...string) string {
	for _, n := range names {
		p := filepath.Join(dir, n)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// diskInfo asks qemu-img for a disk image's format and virtual size.
func diskInfo(ctx context.Context, qemuImg, path string) (string, int64, error) {
	out, err := runQemuImg(ctx, qemuImg, "info", "--output=json", "-U", path)
	if err != nil {
		return "", 0, err
	}
	var info struct {
		Format string `json:"format"`
		Size   int64  `json:"virtual-size"`
	}
	if err := json.Unmarshal(out, &info); err != nil || info.Format == "" {
		return "", 0, fmt.Errorf("qemu-img info gave no format: %s", out)
	}
	return info.Format, info.Size, nil
}

func runQemuImg(ctx context.Context, qemuImg string, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, qemuImg, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", qemuImg, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// makeDisk creates the VM's disk: a qcow2 overlay backed by the image's
// disk (grown to disk_bytes when that is larger; never smaller than the
// image, which would cut its file system off), or an empty disk of
// disk_bytes for a kernel image; none for a kernel image without.
func makeDisk(ctx context.Context, cfg Config, img Image, rc ResourceConfig, l *Layout) error {
	overlay := filepath.Join(l.Dir, "disk.qcow2")
	switch {
	case img.Disk != "":
		args := []string{"create", "-q", "-f", "qcow2", "-F", img.DiskFormat, "-b", img.Disk, overlay}
		if rc.DiskBytes > img.DiskBytes {
			args = append(args, fmt.Sprint(rc.DiskBytes))
		}
		if _, err := runQemuImg(ctx, cfg.QemuImg, args...); err != nil {
			return err
		}
	case rc.DiskBytes > 0:
		if _, err := runQemuImg(ctx, cfg.QemuImg, "create", "-q", "-f", "qcow2", overlay, fmt.Sprint(rc.DiskBytes)); err != nil {
			return err
		}
	default:
		return nil
	}
	l.Overlay = overlay
	return nil
}

// tapExists says whether a network device of that name exists in the
// plugin's network namespace. It asks the kernel (netlink), not
// /sys/class/net: a plugin started into a network namespace (an agent that
// is its node's host in a namespace) still sees the sysfs of the mount
// namespace it came from, which lists another namespace's devices.
func tapExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}
