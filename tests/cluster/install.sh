#!/bin/sh
# Installs what tests/cluster needs on a fresh Debian 12 machine (run as root).
# Idempotent and quiet: apt-get update runs only when a package is missing.
#   ip (iproute2), nsenter/unshare (util-linux), sshd + ssh-keygen (openssh), dockerd +
#   containerd + runc (docker.io), podman, debootstrap (the fake engine's rootfs), iptables
#   (the bridge's FORWARD accept rule), python3 (the nvidia-smi and GPU hook stand-ins), tmux
#   (tests read the CLI's tables off a real 80-column terminal), docker-registry (the registry
#   `inkctl build --push` pushes to; tests/cluster/registry.py), rsync (benchmarks/weights.py's baseline),
#   slurm-wlm + munge (a real Slurm for `--slurm`; tests/cluster/slurm.py; no slurmdbd: jobs are
#   followed with scontrol, which keeps ended jobs for MinJobAge).
set -eu

PACKAGES="iproute2 util-linux openssh-server openssh-client docker.io containerd runc podman debootstrap iptables python3 tar tmux docker-registry rsync slurm-wlm munge"

if [ "$(id -u)" != 0 ]; then
    echo "install.sh: run as root" >&2
    exit 1
fi

missing=""
for p in $PACKAGES; do
    if ! dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

log=$(mktemp /tmp/inkctl-test-install.XXXXXX)
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq && apt-get install -y -qq $missing; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "install.sh: installing$missing failed (log above)" >&2
    exit 1
fi
rm -f "$log"
echo "installed:$missing"
