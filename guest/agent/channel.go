package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// PortName is the name the host gives the agent's virtio-serial port
// (-device virtserialport,name=klab.agent).
const PortName = "klab.agent"

// FallbackTTY is the serial port the agent uses when the kernel has no
// virtio console port named PortName.
const FallbackTTY = "ttyS1"

// DefaultChannelWait is how long WaitChannel waits for the virtio port's
// name and device node to appear.
const DefaultChannelWait = 5 * time.Second

// FindChannel looks once for the agent channel: the device under devRoot
// (normally /dev) named like the directory under
// sysRoot/class/virtio-ports whose name file holds PortName.
//
//   - That port found and its device node present: (node, true).
//   - That port found but no node yet: (node, false), keep waiting.
//   - Virtio ports present but some still without a name (the host sends
//     names after the driver probed): ("", false), keep waiting.
//   - Otherwise (no virtio console, or only other named ports):
//     (devRoot/FallbackTTY, true).
func FindChannel(sysRoot, devRoot string) (path string, ready bool) {
	fallback := filepath.Join(devRoot, FallbackTTY)
	ents, err := os.ReadDir(filepath.Join(sysRoot, "class", "virtio-ports"))
	if err != nil {
		return fallback, true
	}
	unnamed := false
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(sysRoot, "class", "virtio-ports", e.Name(), "name"))
		name := strings.TrimSpace(string(b))
		if err != nil || name == "" {
			unnamed = true
			continue
		}
		if name != PortName {
			continue
		}
		node := filepath.Join(devRoot, e.Name())
		_, err = os.Stat(node)
		return node, err == nil
	}
	if unnamed {
		return "", false
	}
	return fallback, true
}

// WaitChannel polls FindChannel until it is ready, for at most wait, and
// returns the device to open. When the wait runs out (or ctx ends) first, it
// returns the serial fallback.
func WaitChannel(ctx context.Context, sysRoot, devRoot string, wait time.Duration) string {
	deadline := time.Now().Add(wait)
	for {
		path, ready := FindChannel(sysRoot, devRoot)
		if ready {
			return path
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return filepath.Join(devRoot, FallbackTTY)
		}
		// The port appears a few ms after virtio_console's probe: look
		// often at first, then every 50 ms.
		poll := 50 * time.Millisecond
		if time.Until(deadline) > wait-2*time.Second {
			poll = 2 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(poll):
		}
	}
}

// OpenChannel opens the channel device for reading and writing in blocking
// mode. A terminal (the serial fallback) is switched to raw mode first.
func OpenChannel(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open channel %s: %w", path, err)
	}
	if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
		if err := MakeRaw(fd); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("open channel %s: %w", path, err)
		}
	} else if !errors.Is(err, unix.ENOTTY) && !errors.Is(err, unix.EINVAL) {
		unix.Close(fd)
		return nil, fmt.Errorf("open channel %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// MakeRaw puts the terminal fd into raw mode like cfmakeraw(3): 8 data
// bits, no parity, no echo, no line editing or signals, no CR/NL
// translation either way, no flow control, reads return each byte, at
// 115200 baud. Pending input is discarded.
func MakeRaw(fd int) error {
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return fmt.Errorf("raw mode: %w", err)
	}
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON | unix.IXOFF | unix.IXANY
	t.Oflag &^= unix.OPOST | unix.ONLCR | unix.OCRNL
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB | unix.CRTSCTS | unix.CBAUD
	t.Cflag |= unix.CS8 | unix.CREAD | unix.CLOCAL | unix.B115200
	t.Ispeed = unix.B115200
	t.Ospeed = unix.B115200
	t.Cc[unix.VMIN] = 1
	t.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETSF, t); err != nil {
		return fmt.Errorf("raw mode: %w", err)
	}
	return nil
}
