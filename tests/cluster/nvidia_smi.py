#!/usr/bin/python3
"""An ``nvidia-smi`` stand-in for GPU-less test hosts. Installed as <state>/hN/bin/nvidia-smi
with PROFILE set to the text of a tests/fixtures/nvidia-smi/profiles/*.csv file (itself
``nvidia-smi --query-gpu=... --format=csv`` output: header with units, one row per GPU), so the
script stands alone (the GPU hook copies it into containers too).

Answers: --query-gpu=F1,F2 --format=csv[,noheader][,nounits] [-i IDS], -L, --version,
--query-compute-apps=... (the rows of ``compute-apps.csv`` beside this script, as a real
``--format=csv,noheader,nounits`` answer; no file: nothing runs, an empty answer) and no
arguments (the summary table).
"""

import sys
import time

PROFILE = ""  # replaced by gpu.py with the profile's CSV text
ALIASES = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id", "pci.bus_id": "pci.bus_id",
           "persistence-mode": "persistence_mode", "pstate": "pstate", "compute-cap": "compute_cap"}


def load():
    lines = [ln for ln in PROFILE.splitlines() if ln.strip()]
    heads = [h.strip() for h in lines[0].split(", ")]
    fields, units = [], {}
    for h in heads:
        name, _, unit = h.partition(" [")
        fields.append(name)
        if unit:
            units[name] = unit.rstrip("]")
    gpus = [dict(zip(fields, (v.strip() for v in ln.split(", ")))) for ln in lines[1:]]
    return gpus, units


def query(gpus, units, spec, fmt):
    opts = {o.strip() for o in fmt.split(",")}
    if "csv" not in opts:
        print(f'"{fmt}" is not a valid format.', file=sys.stderr)
        return 2
    names = [n.strip() for n in spec.split(",") if n.strip()]
    fields = []
    for n in names:
        f = ALIASES.get(n, n)
        if f != "count" and f not in gpus[0]:
            print(f'Field "{n}" is not a valid field to query.\n', file=sys.stderr)
            return 2
        fields.append(f)
    if "noheader" not in opts:
        print(", ".join(n + (f" [{units[f]}]" if f in units else "") for n, f in zip(names, fields)))
    for g in gpus:
        vals = []
        for f in fields:
            v = str(len(gpus)) if f == "count" else g[f]
            if "nounits" in opts and f in units and v.endswith(" " + units[f]):
                v = v[: -len(units[f]) - 1]
            vals.append(v)
        print(", ".join(vals))
    return 0


def compute_apps(fmt):
    """Processes holding GPU memory: tests write them (real answers) into compute-apps.csv."""
    import os

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compute-apps.csv")
    try:
        with open(path) as f:
            rows = [ln.rstrip("\n") for ln in f if ln.strip()]
    except OSError:
        rows = []
    if "noheader" not in fmt:
        print("gpu_uuid, pid, process_name, used_gpu_memory [MiB]")
    for row in rows:
        print(row if "nounits" in fmt else row + " MiB")
    return 0


def table(gpus):
    drv = gpus[0]["driver_version"]
    cuda = "13.0"
    bar = "+-----------------------------------------+------------------------+----------------------+"
    print(time.strftime("%a %b %d %H:%M:%S %Y       "))
    print("+-----------------------------------------------------------------------------------------+")
    print(f"| NVIDIA-SMI {drv:<23}Driver Version: {drv:<15}CUDA Version: {cuda:<9}|")
    print(bar)
    print("| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |")
    print("| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |")
    print("|                                         |                        |               MIG M. |")
    print("|=========================================+========================+======================|")
    for g in gpus:
        name = g["name"] if len(g["name"]) <= 24 else g["name"][:21] + "..."
        pm = "On" if g.get("persistence_mode") == "Enabled" else "Off"
        used, total = g["memory.used"].replace(" ", ""), g["memory.total"].replace(" ", "")
        mem = f"{'Not Supported':>23} " if total == "[N/A]" else f"{used:>11} / {total:<9} "
        pw = g["power.draw"].split(".")[0] + "W"
        cap = "N/A" if g["power.limit"] == "[N/A]" else g["power.limit"].split(".")[0] + "W"
        util = g["utilization.gpu"].replace(" ", "")
        print(f"| {g['index']:>3}  {name:<{33 - len(pm)}}{pm}  |{g['pci.bus_id']:>19} Off |{'0':>21} |")
        print(f"| N/A   {g['temperature.gpu']}C    {g['pstate']}{pw:>16} / {cap:>5} |{mem}|{util:>8}      Default |")
        print(f"|{'':41}|{'':24}|{'Disabled':>21} |")
        print(bar)
    print()
    print("+-----------------------------------------------------------------------------------------+")
    print("| Processes:                                                                              |")
    print("|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |")
    print("|        ID   ID                                                               Usage      |")
    print("|=========================================================================================|")
    print("|  No running processes found                                                             |")
    print("+-----------------------------------------------------------------------------------------+")
    return 0


def main(argv):
    gpus, units = load()
    opts, it = {}, iter(argv)
    for a in it:
        key, eq, val = a.partition("=")
        if key in ("--query-gpu", "--query-compute-apps", "--format", "-i", "--id"):
            opts[key] = val if eq else next(it, "")
        else:
            opts[a] = True
    ids = opts.get("-i") or opts.get("--id")
    if ids:
        want = {x.strip() for x in ids.split(",")}
        gpus = [g for g in gpus if g["index"] in want or g["uuid"] in want or g["pci.bus_id"] in want]
        if not gpus:
            print("No devices were found", file=sys.stderr)
            return 6
    if "--version" in opts:
        d = gpus[0]["driver_version"]
        print(f"NVIDIA-SMI version  : {d}\nNVML version        : {d.rsplit('.', 1)[0]}\n"
              f"DRIVER version      : {d}\nCUDA Version        : 13.0")
        return 0
    if "-L" in opts or "--list-gpus" in opts:
        for g in gpus:
            print(f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})")
        return 0
    if "--query-gpu" in opts:
        return query(gpus, units, opts["--query-gpu"], opts.get("--format", "csv"))
    if "--query-compute-apps" in opts:
        return compute_apps(opts.get("--format", "csv"))
    if set(opts) <= {"-i", "--id"}:
        return table(gpus)
    print("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
