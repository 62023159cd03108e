"""torchrun in one place: joining the process group, and the few collectives PPO and the trainer need.

Under torchrun (RANK/WORLD_SIZE set) each rank steps its own envs and PPO stays one run: `global_step`
and the episode stats are summed over ranks after every vector step / rollout, so every rank cuts the last
rollout at the same step and runs the same number of minibatches; gradients are averaged over ranks every
minibatch (one flat all-reduce) and the weights are broadcast from rank 0 at every PPO.train() call, so all
ranks hold identical weights throughout. Advantages are normalised per rank-local minibatch.

Every function here is the identity (or a no-op) on one process: a plain `python train.py` never touches
torch.distributed, and ppo.py, code_actions.py and run_dir.py call these without asking which case they are in.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from datetime import timedelta

import torch
import torch.distributed as dist


def init_distributed(device: str) -> tuple[int, int, str]:
    """(rank, world size, device); device "auto" is CUDA when available, else the CPU. torchrun sets
    RANK/WORLD_SIZE/LOCAL_RANK: join its group, gloo on CPU, nccl on GPUs (one GPU per rank). A plain
    `python train.py` never touches torch.distributed."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if "WORLD_SIZE" not in os.environ:
        return 0, 1, device
    if device == "cuda":
        device = f"cuda:{os.environ['LOCAL_RANK']}"
        torch.cuda.set_device(device)
    # long timeout: the other ranks wait at a broadcast while rank 0 plans, codes and critiques
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", timeout=timedelta(hours=2))
    return dist.get_rank(), dist.get_world_size(), device


def leave() -> None:
    """Leave torchrun's process group at the end of a run (a no-op on one process)."""
    if enabled():
        dist.destroy_process_group()


def end_process(code: int) -> None:
    """Exit with `code`. A torchrun rank skips the interpreter's teardown (os._exit, after flushing): there
    gloo's C++ threads can abort the process (SIGABRT, "terminate called without an active exception") after
    the run has finished and left its group, in 2 of 10 runs of tests/test_distributed.py here, and torchrun
    then reports the whole run as failed. Everything the run writes is closed by then (train.py's finally)."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)


def enabled() -> bool:
    """True inside a torchrun process group; False for a plain `python train.py`."""
    return dist.is_available() and dist.is_initialized()


def all_gather(items: list) -> list:
    """Every rank's list, concatenated in rank order (one list per rank on one process)."""
    if not enabled():
        return list(items)
    parts = [None] * dist.get_world_size()
    dist.all_gather_object(parts, items)
    return [x for part in parts for x in part]


_CPU_GROUP: list = []  # under nccl: a gloo group for the per-step CPU count (made once, by every rank)


def sum_over_ranks(n: int) -> int:
    """n summed over the ranks, on the CPU (gloo) even when the ranks train on GPUs: the step count is
    summed after every vector step, and a GPU all-reduce would make the env loop wait for the GPU."""
    if not enabled():
        return n
    if not _CPU_GROUP:
        _CPU_GROUP.append(None if dist.get_backend() == "gloo" else dist.new_group(backend="gloo"))
    t = torch.tensor([n])
    dist.all_reduce(t, group=_CPU_GROUP[0])
    return int(t)


def mean_over_ranks(t: torch.Tensor) -> torch.Tensor:
    """`t` averaged over the ranks, in place (PPO's approx_kl: every rank must stop after the same epoch)."""
    if enabled():
        dist.all_reduce(t)
        t /= dist.get_world_size()
    return t


def broadcast(obj):
    """Rank 0's `obj` on every rank (any picklable object); `obj` itself on one process."""
    if not enabled():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def broadcast_weights(module: torch.nn.Module) -> None:
    """Rank 0's weights on every rank, in place (after Agent.extend or a resume)."""
    if enabled():
        for t in module.state_dict().values():
            dist.broadcast(t, src=0)


def average_gradients(parameters: Iterable[torch.nn.Parameter]) -> None:
    """One all-reduce of all gradients flattened (cheaper than one per tensor), so every rank takes
    the same Adam step and the weights stay bit-identical. Parameters without a gradient are left
    out, not zero-filled: Adam skips a parameter whose grad is None, while a zero gradient would
    still decay its moments and move it. Every rank runs the same graph, so all leave out the same."""
    if not enabled():
        return
    params = [p for p in parameters if p.grad is not None]
    grads = [p.grad for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    for p, g in zip(params, flat.split([g.numel() for g in grads]), strict=True):
        p.grad = g.view_as(p)
