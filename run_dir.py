"""The run directory: metrics and episode logs, checkpoints, and what --resume needs to go on from them.

Every file a run writes besides the per-iteration plans and code lives here, with the rules that keep
them consistent over a crash and a resume: the append-only logs are cut back to the checkpoint's sizes,
the episodes going on at a checkpoint are written to unfinished.jsonl, and under torchrun rank 0 alone
writes while every rank gathers at the same points. Also here: joining torchrun's process group and
choosing the LLM backend, the two things main() sets up before the first file is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from tqdm import tqdm

import ppo as P
from code_actions import Library, is_crafter
from llm import LLMClient, ReplayClient, configured_endpoint, start_local_server

APPEND_LOGS = ("metrics.jsonl", "stats.jsonl", "unfinished.jsonl", "eval.jsonl")  # rewound on --resume


def init_distributed(device: str) -> tuple[int, int, str]:
    """(rank, world size, device). torchrun sets RANK/WORLD_SIZE/LOCAL_RANK: join its group, gloo on
    CPU, nccl on GPUs (one GPU per rank). A plain `python train.py` never touches torch.distributed."""
    if "WORLD_SIZE" not in os.environ:
        return 0, 1, device
    if device == "cuda":
        device = f"cuda:{os.environ['LOCAL_RANK']}"
        torch.cuda.set_device(device)
    # long timeout: the other ranks wait at a broadcast while rank 0 plans, codes and critiques
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", timeout=timedelta(hours=2))
    return dist.get_rank(), dist.get_world_size(), device


def make_llm(args, run_dir: Path):
    """The agents' backend (None = the hand-written library) and a sentence saying why it was chosen."""
    kind = args.llm
    if args.mode == "rl":
        return None, None, "no LLM: --mode rl is plain PPO"
    if kind == "auto":
        url = args.llm_url or configured_endpoint()
        kind = "http" if url else "library"
        why = f"an endpoint is configured ({url})" if url else "no endpoint is configured (set RLGPT_LLM_URL)"
        print(f"LLM backend: {kind} (auto: {why})")
    transcript = run_dir / "llm_transcript.jsonl"
    if kind == "library":
        return None, None, "library: hand-written reference skills and plans (no LLM)"
    if kind.startswith("replay:"):
        return ReplayClient(kind[7:]), None, f"replay of {kind[7:]}"
    server = None
    if kind == "local":
        server = start_local_server()
        client = LLMClient(server.url, "local", transcript=transcript, vision=False, log=tqdm.write)
    else:
        client = LLMClient(args.llm_url, args.llm_model, transcript=transcript, vision=args.vision,
                           log=tqdm.write)
        client.check_reachable()
    return client, server, f"{kind}: {client.url} model {client.model or '(server default)'}"


def running_episodes(args, envs) -> tuple[list[dict], list[int]]:
    """The episodes in progress as Crafter rows (steps taken so far) and each env's episode number,
    gathered over the ranks (every rank must call this at the same point)."""
    if not is_crafter(args):
        return [], []
    rows = [r for r in envs.call("stats_row") if r["length"] > 0]
    return P.all_gather(rows), P.all_gather(list(envs.get_attr("episode_number")))


def write_rows(path: Path, rows: list[dict]) -> None:
    with open(path, "a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))


def log_metrics(run: dict, metrics: dict, step: int) -> None:
    if run["rank"]:  # rank 0 alone logs
        return
    for k, v in metrics.items():
        run["writer"].add_scalar(k, v, step)
    if run["wandb"] is not None:
        run["wandb"].log(dict(metrics, global_step=step))
    with open(run["dir"] / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"global_step": step, "iteration": run["iteration"] + 1, **metrics}) + "\n")


def llm_calls(run: dict) -> int:
    """LLM calls of the whole run: those before the last resume (from the checkpoint) and this process's."""
    return run["llm_calls_before"] + (run["llm"].calls if run["llm"] is not None else 0)


def save(run: dict, ppo: P.PPO, library: Library, state: dict) -> None:
    """Called by every rank at the same point (a rollout boundary): the episodes in progress are gathered,
    so a resume can write them to unfinished.jsonl and go on with the next episode number of each env."""
    running, episode_numbers = running_episodes(run["args"], run["envs"])
    if run["rank"]:  # rank 0 alone checkpoints (all ranks hold the same weights)
        return
    logs = {name: (run["dir"] / name).stat().st_size for name in APPEND_LOGS if (run["dir"] / name).is_file()}
    state = dict(state, library_active=library.active, log_sizes=logs, running=running,
                 episode_numbers=episode_numbers, llm_calls=llm_calls(run))
    P.save_checkpoint(str(run["dir"] / "checkpoint.pt"), ppo, [asdict(a) for a in library.actions], state)


def rewind_logs(run_dir: Path, sizes: dict[str, int], running: list[dict]) -> None:
    """On resume, cut the append-only logs back to the checkpoint, so the steps run again after it are
    not counted twice in curves and in Crafter's score. The episodes that were going on at the
    checkpoint cannot go on (a resumed run starts new worlds): they go to unfinished.jsonl with the
    steps they had taken, so stats.jsonl + unfinished.jsonl still sum to global_step."""
    for name in APPEND_LOGS:
        path = run_dir / name
        if path.is_file() and path.stat().st_size > sizes.get(name, 0):
            with open(path, "r+b") as f:
                f.truncate(sizes.get(name, 0))
    write_rows(run_dir / "unfinished.jsonl", running)


def check_ranks_agree(run_dir: Path, ppo: P.PPO, library: Library, rank: int) -> None:
    """ranks.json: each rank's step count, weight hash and code actions; they must all agree."""
    weights = b"".join(t.cpu().numpy().tobytes() for t in ppo.agent.state_dict().values())
    mine = {"rank": rank, "global_step": ppo.global_step, "weights_sha256": hashlib.sha256(weights).hexdigest(),
            "code_actions": [[a.name, hashlib.sha256(a.source.encode()).hexdigest()[:16]] for a in library.actions]}
    ranks = P.all_gather([mine])
    if rank == 0:
        (run_dir / "ranks.json").write_text(json.dumps(ranks, indent=2))
        if any(dict(r, rank=0) != dict(mine, rank=0) for r in ranks):
            print(f"warning: the ranks disagree (see {run_dir / 'ranks.json'})", file=sys.stderr)

