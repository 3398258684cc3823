"""One sshd per host, listening on the host's address inside its netns, with its own ed25519
host key; one client key for root, authorised through an AuthorizedKeysFile in the state dir."""

import os

from .proc import HarnessError, cmdline, read_pid, run, tcp_banner, wait_for

SSHD = "/usr/sbin/sshd"
# Podman hosts run sshd in a private mount namespace: a private /run (podman's runtime state
# stays in it and vanishes with it), podman's storage on a tmpfs (gone with it too), their own
# nvidia-smi for the CDI spec to mount, and no
# docker: an overlay with a whiteout hides docker/dockerd in each bin dir (the host "has" podman only).
PODMAN_HOST_SETUP = r"""set -e
mount -t tmpfs -o mode=755,size=64m inkctl-run /run
mkdir -p /run/sshd /run/inkctl-gpu
cp "$INKCTL_SMI" /run/inkctl-gpu/nvidia-smi
mount -t tmpfs -o size=8g,mode=700 inkctl-podman-storage "$INKCTL_PODMAN_STORAGE"
for d in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
  [ -d "$d" ] && [ ! -L "$d" ] || continue
  hide=/run/inkctl-hide$(echo "$d" | tr / _)
  for n in docker dockerd; do
    if [ -e "$d/$n" ]; then mkdir -p "$hide"; mknod "$hide/$n" c 0 0; fi
  done
  if [ -d "$hide" ]; then mount -t overlay inkctl-hide -o "lowerdir=$hide:$d" "$d"; fi
done
exec "$@"
"""


def client_key(root):
    key = os.path.join(root, "client", "id_ed25519")
    if not os.path.exists(key):
        os.makedirs(os.path.dirname(key), mode=0o700, exist_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "inkctl-test-client", "-f", key])
    auth = os.path.join(root, "client", "authorized_keys")
    with open(key + ".pub") as f, open(auth, "w") as out:
        out.write(f.read())
    os.chmod(auth, 0o600)
    return key


def host_key(host):
    key = host.path("ssh", "ssh_host_ed25519_key")
    if not os.path.exists(key):
        os.makedirs(os.path.dirname(key), mode=0o700, exist_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{host.name}", "-f", key])
    return key


def _quote(v):
    return f'"{v}"' if any(c in v for c in ' "#') else v


def write_config(host):
    cfg = host.path("sshd_config")
    setenv = " ".join(f"{k}={_quote(v)}" for k, v in host.session_env.items())
    lines = [
        f"# sshd of test host {host.name} (written by tests/cluster)",
        "Port 22",
        f"ListenAddress {host.address}",
        f"HostKey {host_key(host)}",
        f"PidFile {host.sshd_pid_file}",
        f"AuthorizedKeysFile {os.path.join(host.root, 'client', 'authorized_keys')}",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password",
        "UsePAM no",
        "UseDNS no",
        "PrintMotd no",
        "PrintLastLog no",
        "StrictModes yes",
        "MaxStartups 200:30:400",
        "MaxSessions 200",
        "AllowTcpForwarding yes",
        "X11Forwarding no",
        "Subsystem sftp internal-sftp",
        f"SetEnv {setenv}",
        "",
    ]
    with open(cfg, "w") as f:
        f.write("\n".join(lines))
    return cfg


def start(host):
    """Start sshd in the host's netns; return its pid once it answers on address:22."""
    cfg, log = write_config(host), host.path("sshd.log")
    run([SSHD, "-t", "-f", cfg])
    argv = ["nsenter", f"--net={host.netns_path}"]
    env = None
    if host.runtime == "podman":
        argv += ["unshare", "--mount", "--propagation", "private", "sh", "-c", PODMAN_HOST_SETUP, "sh"]
        env = dict(os.environ, INKCTL_SMI=os.path.join(host.bin_dir, "nvidia-smi"),
                   INKCTL_PODMAN_STORAGE=host.path("podman", "storage"))
    run(argv + [SSHD, "-f", cfg, "-E", log], env=env)
    wait_for(f"sshd of {host.name} on {host.address}:22", lambda: tcp_banner(host.address, 22).startswith(b"SSH-"),
             timeout=20, on_timeout=lambda: _tail(log))
    pid = read_pid(host.sshd_pid_file)
    if not pid or cfg not in cmdline(pid):
        raise HarnessError(f"sshd of {host.name} runs but its pid file {host.sshd_pid_file} does not name it")
    return pid


def host_public_key(host):
    with open(host_key(host) + ".pub") as f:
        kind, blob = f.read().split()[:2]
    return f"{kind} {blob}"


def _tail(path, n=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""
