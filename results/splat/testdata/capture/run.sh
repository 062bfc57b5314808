#!/bin/bash
# run.sh VMLINUZ SPLATGEN_KO OUT.log "KERNEL ARGS"
#
# Boots VMLINUZ under QEMU (TCG, 2 vCPUs) with an initramfs holding only the
# inject program as /init and splatgen.ko, and saves the serial console to
# OUT.log. KERNEL ARGS say what to provoke, for example
#   "splat.what=warn,warn_msg,refcount"
#   "splat.sysctl=kernel.hung_task_timeout_secs:2 splat.what=hung,sleep-5s,sysrq-w,sleep-10s"
set -euo pipefail
kernel=$1 ko=$2 out=$3 args=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
d=$(mktemp -d)
trap 'rm -rf "$d" "$d.cpio"' EXIT
(cd "$here/../../../.." && CGO_ENABLED=0 go build -o "$d/init" ./results/splat/testdata/capture/inject)
cp "$ko" "$d/splatgen.ko"
mkdir -p "$d/proc" "$d/sys" "$d/dev"
(cd "$d" && printf 'init\nsplatgen.ko\nproc\nsys\ndev\n' | cpio -o -H newc --quiet > "$d.cpio")
timeout "${TIMEOUT:-180}" qemu-system-x86_64 -machine pc,accel=tcg -cpu max -m 1024 -smp 2 \
	-kernel "$kernel" -initrd "$d.cpio" -append "console=ttyS0 rdinit=/init panic=1 $args" \
	-display none -monitor none -no-reboot -serial "file:$out" >/dev/null 2>&1 || true
wc -l "$out"
