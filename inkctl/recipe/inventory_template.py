"""The inventory ``inkctl init`` writes beside a recipe: made for that recipe, so it plans as written.

A fixed example inventory does not fit every recipe: one GPU on a box the recipe gives eight,
or one site's NIC names silently replacing the interface a recipe sets. This one has the recipe's
number of hosts, each selecting the recipe's GPUs per host, per-host NIC names only where the
recipe leaves them to the inventory, and a value for every ``${NAME}`` the recipe reads from
its hosts. The addresses are documentation addresses (RFC 5737): edit them.
"""

from __future__ import annotations

from inkctl.recipe.fields import VAR_RE
from inkctl.recipe.model import Recipe

# ${NAME}s a host answers without vars (plan/hostvars.py); HOME comes from the user
BUILTIN = {"HOST", "HOST_ADDRESS", "HEAD_ADDRESS", "RANK", "GPUS", "NCCL_SOCKET_IFNAME", "HOME"}
USER = "ubuntu"
EXAMPLE_VALUES = {
    "HF_CACHE": f"/home/{USER}/.cache/huggingface",
    "HF_HOME": f"/home/{USER}/.cache/huggingface",
}


def host_vars(recipe_text: str) -> list[str]:
    """The ``${NAME}``s in the recipe that each host must give a value for, in order of appearance."""
    seen: list[str] = []
    for line in recipe_text.splitlines():
        line = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
        for m in VAR_RE.finditer(line):
            if m.group(1) not in BUILTIN and m.group(1) not in seen:
                seen.append(m.group(1))
    return seen


def inventory_for(recipe: Recipe, recipe_text: str, recipe_file: str) -> str:
    """The text of an inventory that fits RECIPE (the file it came from is RECIPE_FILE)."""
    hw, net = recipe.hardware, recipe.network
    multinode = hw.nodes > 1
    gpus = ",".join(str(i) for i in range(hw.gpus_per_host))
    read = multinode and net.rdma  # up reads the interface and the rails from each host (plan/fabric.py)
    own_ifname = multinode and not net.socket_ifname and not read
    names = host_vars(recipe_text)
    out = [
        f"# The hosts for {recipe_file},",
        "# in rank order (rank 0 is the head).",
        "# Placeholders (192.0.2.0/24 is for documentation): put yours.",
    ]
    if multinode and net.socket_ifname:
        hca = f", ib_hca {list(net.ib_hca)}" if net.ib_hca else ""
        out.append(f"# The recipe sets nccl_socket_ifname {net.socket_ifname!r}{hca}; set them on a host only where")
        out.append("# its names differ.")
    if read:
        out.append("# up reads each host's NCCL interface, RDMA rails and RoCE v2 GID index")
        out.append("# from its sysfs, every time: pin nccl_socket_ifname or ib_hca on a host")
        out.append("# only to override what it reads.")
    out.append("hosts:")
    for i in range(hw.nodes):
        out.append(f"  - name: gpu-{i}" + ("                  # or an alias from ~/.ssh/config" if i == 0 else ""))
        out.append(f"    address: 192.0.2.{10 + i}")
        if multinode:
            out.append(f"    cluster_address: 198.51.100.{10 + i}" + ("   # the address other ranks reach it on" if i == 0 else ""))
        out.append(f"    user: {USER}")
        out.append(f'    gpus: "{gpus}"' + ("                  # the GPU indices this deployment uses" if i == 0 else ""))
        if own_ifname:
            out.append("    nccl_socket_ifname: enp1s0f1np1" + ("   # your interface name (ip -br link)" if i == 0 else ""))
        if names:
            pairs = ", ".join(f"{n}: {EXAMPLE_VALUES.get(n, '/CHANGE/ME')}" for n in names)
            out.append(f"    vars: {{{pairs}}}")
    return "\n".join(out) + "\n"
