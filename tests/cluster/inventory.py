"""What clients of the cluster read: inventory.yaml (inkctl's inventory format), known_hosts,
host_keys/<name>.pub and an ssh_config with one Host entry per test host."""

import json
import os

from . import sshd


def _y(v):
    """A YAML scalar: JSON strings are valid YAML."""
    return json.dumps(v) if isinstance(v, str) else str(v)


def write(root, hosts, identity):
    lines = ["# written by `python -m tests.cluster up`; the test cluster's hosts, in rank order", "hosts:"]
    for h in hosts:
        lines += [
            f"  - name: {h.name}",
            f"    address: {h.address}",
            "    user: root",
            "    port: 22",
            f"    identity_file: {_y(identity)}",
            f"    state_dir: {_y(h.state_dir)}",
            "    nccl_socket_ifname: eth0",
            f"    vars: {{HF_HOME: {_y(h.hf_dir)}}}",
        ]
    _write(os.path.join(root, "inventory.yaml"), "\n".join(lines) + "\n")

    keys_dir = os.path.join(root, "host_keys")
    os.makedirs(keys_dir, exist_ok=True)
    known = []
    for h in hosts:
        key = sshd.host_public_key(h)
        _write(os.path.join(keys_dir, f"{h.name}.pub"), key + "\n")
        known.append(f"{h.address} {key}")
    known_hosts = os.path.join(root, "known_hosts")
    _write(known_hosts, "\n".join(known) + "\n")

    cfg = ["# ssh -F <this file> h1", ""]
    for h in hosts:
        cfg += [f"Host {h.name}", f"  HostName {h.address}", "  User root", "  Port 22", f"  IdentityFile {identity}",
                "  IdentitiesOnly yes", f"  UserKnownHostsFile {known_hosts}", "  StrictHostKeyChecking yes",
                "  BatchMode yes", ""]
    _write(os.path.join(root, "ssh_config"), "\n".join(cfg))


def _write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
