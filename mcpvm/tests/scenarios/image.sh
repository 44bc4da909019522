# Root image scenarios, run on real KVM by testbed/run (directly or nested).
# Each case leaves $MCPVM_OUT/<case>.out (stdout), .err (stderr), .rc.
# Payload: bin/mcpvm, kernel/vmlinux, initramfs-test.cpio, runtime.erofs.
set -u
. ./case.sh
R="mcpvm run --timeout 300 --mem 512 --image runtime.erofs"
sha256sum runtime.erofs > "$MCPVM_OUT/image_before.sha"

# The runtimes in the image answer, inside the VM.
case_ runtimes $R -- /bin/sh -c 'python3 -c "import sys; print(\"python\", sys.version_info[:2])"; node -e "console.log(\"node\", process.version)"; git --version; head -1 /etc/os-release; id -u'

# What a developer's machine has and corpus servers call: ps lists the
# VM's processes, lsof its open files, curl and unzip answer, ICU loads
# (a .NET server exits at start without it; python's ctypes finds it as
# .NET does, by name).
case_ dev_tools $R -- /bin/sh -c 'ps -eo pid,comm | head -3; lsof -v 2>&1 | grep -m1 revision; curl --version | head -1; unzip -v | head -1; which which; python3 -c "import ctypes; ctypes.CDLL(\"libicuuc.so.72\"); print(\"icu loaded\")"'

# The server runs as the unprivileged user mcp: its home, the workspace
# (files the host sent included) and /tmp are its own, the system is
# not, a port below 1024 is open to it, and the image's passwd names it.
mkdir -p ws && echo seeded > ws/seeded.txt
case_ server_user $R --workspace ws,rw -- /bin/sh -c 'id; echo "HOME=$HOME USER=$USER XDG=$XDG_RUNTIME_DIR"; touch "$HOME/x" && echo home-writable; echo more >> /workspace/seeded.txt && touch /workspace/new && echo workspace-writable; touch /tmp/x && echo tmp-writable; touch /etc/x 2>&1; getent passwd mcp; python3 -c "import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 80)); print(\"bound port 80\")"'

# A profile may ask for root.
case_ root_user $R --profile root -- /bin/sh -c 'id -u; echo "HOME=$HOME"'

# The tmpfs overlay takes root's writes anywhere in the root...
case_ overlay_write $R --profile root -- /bin/sh -c 'echo written > /etc/mcpvm-test && cat /etc/mcpvm-test && mkdir -p /opt/mcp/x && echo ok-opt'

# ...and without it the root is read-only, to root as well, and the
# user's home with it.
case_ read_only_root $R --profile root --read-only-root -- /bin/sh -c 'touch /etc/mcpvm-test'
case_ read_only_home $R --read-only-root -- /bin/sh -c 'id -u; touch "$HOME/x"'
sha256sum runtime.erofs > "$MCPVM_OUT/image_after.sha"

# A file that is no image: one clear error, before anything starts.
head -c 65536 /dev/urandom > bad.img
case_ bad_image mcpvm run --image bad.img -- /bin/true
case_ missing_image mcpvm run --image /nonexistent.erofs -- /bin/true
ls "${XDG_RUNTIME_DIR:-/tmp/mcpvm-$(id -u)}" > "$MCPVM_OUT/rundirs_left.txt" 2>/dev/null
