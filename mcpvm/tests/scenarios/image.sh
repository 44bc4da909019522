# Root image scenarios, run on real KVM by testbed/run (directly or nested).
# Each case leaves $MCPVM_OUT/<case>.out (stdout), .err (stderr), .rc.
# Payload: bin/mcpvm, kernel/vmlinux, initramfs-test.cpio, runtime.erofs.
set -u
. ./case.sh
R="mcpvm run --timeout 300 --mem 512 --image runtime.erofs"
sha256sum runtime.erofs > "$MCPVM_OUT/image_before.sha"

# The runtimes in the image answer, inside the VM.
case_ runtimes $R -- /bin/sh -c 'python3 -c "import sys; print(\"python\", sys.version_info[:2])"; node -e "console.log(\"node\", process.version)"; git --version; head -1 /etc/os-release; id -u'

# The tmpfs overlay takes writes anywhere in the root...
case_ overlay_write $R -- /bin/sh -c 'echo written > /etc/mcpvm-test && cat /etc/mcpvm-test && mkdir -p /opt/mcp/x && echo ok-opt'

# ...and without it the root is read-only.
case_ read_only_root $R --read-only-root -- /bin/sh -c 'touch /etc/mcpvm-test'
sha256sum runtime.erofs > "$MCPVM_OUT/image_after.sha"

# A file that is no image: one clear error, before anything starts.
head -c 65536 /dev/urandom > bad.img
case_ bad_image mcpvm run --image bad.img -- /bin/true
case_ missing_image mcpvm run --image /nonexistent.erofs -- /bin/true
ls "${XDG_RUNTIME_DIR:-/tmp/mcpvm-$(id -u)}" > "$MCPVM_OUT/rundirs_left.txt" 2>/dev/null
