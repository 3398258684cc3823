"""The all-reduce that ``doctor --network`` runs inside the engine image, one process per host.

This file is shipped as text and run by the image's own python3 (its torch, its NCCL), so it
imports nothing from inkctl. torch.distributed reads RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT from the environment; LOCAL_RANK picks the GPU. Rank 0 prints one line per
message size, ``inkctl-allreduce {json}``, with nccl-tests' definitions: algbw = bytes / time,
busbw = algbw * 2 (n - 1) / n. NCCL's own lines (NCCL_DEBUG=INFO) go to stderr as usual.

argv: [min_bytes max_bytes iterations]
"""

import json
import os
import socket
import sys
import time

TAG = "inkctl-allreduce"


def emit(kind, **fields):
    fields["kind"] = kind
    print(TAG, json.dumps(fields, sort_keys=True), flush=True)


def main(argv):
    lo = int(argv[0]) if len(argv) > 0 else 1 << 20
    hi = int(argv[1]) if len(argv) > 1 else 1 << 28
    iters = int(argv[2]) if len(argv) > 2 else 20
    try:
        import torch  # type: ignore[import-not-found]  # the engine image's, not inkctl's
        import torch.distributed as dist  # type: ignore[import-not-found]
    except ImportError as e:
        emit("error", reason="no-torch", detail=str(e))
        return 3
    if not torch.cuda.is_available():
        emit("error", reason="no-cuda", detail="torch.cuda.is_available() is False")
        return 3
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    rank, world = dist.get_rank(), dist.get_world_size()
    nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
    hosts = [None] * world
    dist.all_gather_object(hosts, socket.gethostname())
    if rank == 0:
        emit("start", torch=torch.__version__, nccl=nccl, world=world, hosts=hosts,
             gpu=torch.cuda.get_device_name(dev))
    # correctness first: every rank adds rank + 1
    check = torch.full((1024,), float(rank + 1), device=dev)
    dist.all_reduce(check)
    want = world * (world + 1) / 2
    wrong = int((check != want).sum().item())
    size = lo
    while size <= hi:
        x = torch.ones(size // 4, dtype=torch.float32, device=dev)
        for _ in range(2):
            dist.all_reduce(x)
        torch.cuda.synchronize(dev)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        torch.cuda.synchronize(dev)
        dt = (time.perf_counter() - t0) / iters
        if rank == 0:
            algbw = size / dt / 1e9
            emit("size", bytes=size, time_us=round(dt * 1e6, 2), algbw_gbs=round(algbw, 3),
                 busbw_gbs=round(algbw * 2 * (world - 1) / world, 3), wrong=wrong)
        size *= 4
    dist.destroy_process_group()
    if rank == 0:
        emit("done", wrong=wrong)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
