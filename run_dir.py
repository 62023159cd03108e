"""The run directory: metrics and episode logs, checkpoints, and what --resume needs to go on from them.

Every file a run writes besides the per-iteration plans and code lives here, with the rules that keep
them consistent over a crash and a resume: the append-only logs are cut back to the checkpoint's sizes,
the episodes going on at a checkpoint are written to unfinished.jsonl, and under torchrun rank 0 alone
writes while every rank gathers at the same points. Also here: choosing the LLM backend (the one thing
main() sets up before the first file is written). What an iteration counts as it trains and writes after
evaluation is iteration_record.py's.

train.py's loop holds the run's live handles in a run_state.Run (open_run makes it) and where it is in a
run_state.LoopState (save checkpoints it, resume restores it).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

import distributed
import env
import skill_library
from code_actions import ActionSet
from core import Mode
from llm import LLMClient, LLMError, configured_endpoint
from llm_local import start_local_server
from llm_replay import ReplayClient
from ppo import PPO, PPOConfig, use_bf16
from run_state import LoopState, Run

APPEND_LOGS = ("metrics.jsonl", "stats.jsonl", "unfinished.jsonl", "eval.jsonl")  # rewound on --resume


def open_run(args, cfg: PPOConfig, parser, rank: int, world: int, device: str, policy: str) -> Run | None:
    """Rank 0 creates the run directory (or reopens --resume's), picks the LLM backend and writes config.json
    (with `policy`, the network's policy.identity: a resume with another network stops here, on every rank);
    every rank gets the directory's name. Returns the Run, or None when the LLM backend cannot be used
    (the error is printed, and a directory made for this run is removed: nothing ran)."""
    saved = json.loads((Path(args.resume) / "config.json").read_text()).get("policy") if args.resume else None
    if saved not in (None, policy):  # None: a run from before config.json kept it
        parser.error(f"--resume {args.resume}: that run trained the network {saved}, but this code builds {policy} "
                     "(policy.py changed); resume it with the code that trained it, or start a new run")
    run_dir, created = Path(args.resume) if args.resume else None, False
    if run_dir is None and rank == 0:
        name = args.run_name or f"{args.task.replace(':', '-')}__{args.mode}__{args.seed}__{int(time.time())}"
        run_dir = Path(args.runs_dir) / name
        if (run_dir / "config.json").exists():
            parser.error(f"{run_dir} already holds a run: --resume it, or pick another --run-name")
        created = not run_dir.exists()
        run_dir.mkdir(parents=True, exist_ok=True)
    run_dir = distributed.broadcast(run_dir)  # under torchrun: rank 0's name (the unix time may differ per rank)
    llm, server, backend = None, None, None
    if rank == 0:
        try:
            llm, server, backend = make_llm(args, run_dir)
        except LLMError as e:
            print(f"error: {e}", file=sys.stderr)
            if created:  # nothing ran: leave no empty run directory behind
                shutil.rmtree(run_dir, ignore_errors=True)
            return None
        print(f"run directory: {run_dir}\nmode: {args.mode}; agents' backend: {backend}; device: {device}"
              + (f" (x{world} ranks under torchrun)" if world > 1 else ""))
        # on --resume too: the settings it changed hold for the next resume
        (run_dir / "config.json").write_text(json.dumps(
            {"args": asdict(args), "ppo": asdict(cfg), "policy": policy, "backend": backend, "device": device,
             "bf16_update": use_bf16(cfg.precision, torch.device(device))}, indent=2))

    from torch.utils.tensorboard import SummaryWriter

    run = Run(args, run_dir, rank=rank, world=world, writer=SummaryWriter(str(run_dir)) if rank == 0 else None, llm=llm,
              server=server)
    if args.track and rank == 0:
        import wandb

        run.wandb = wandb.init(project="rlgpt", name=run_dir.name, config=asdict(args), dir=str(run_dir))
    return run


def make_llm(args, run_dir: Path):
    """The agents' backend (None = the reference backend, no LLM) and a sentence saying why it was chosen."""
    kind = args.llm
    if args.mode == Mode.RL:
        return None, None, "no LLM: --mode rl is plain PPO (no prompt is sent: an edit of prompts/ changes nothing)"
    if kind == "auto":
        url = args.llm_url or configured_endpoint()
        kind = "http" if url else "reference"
        why = f"an endpoint is configured ({url})" if url else "no endpoint is configured (set RLGPT_LLM_URL)"
        print(f"LLM backend: {kind} (auto: {why})")
    transcript = run_dir / "llm_transcript.jsonl"
    if kind == "reference":
        return None, None, ("reference: hand-written reference skills and plans (no LLM: no prompt is sent, so an "
                            "edit of prompts/ changes nothing in this run)")
    if kind.startswith("replay:"):
        return ReplayClient(kind[7:], record=transcript, log=tqdm.write), None, f"replay of {kind[7:]}"
    server = None
    if kind == "local":
        server = start_local_server()
        client = LLMClient(server.url, "local", transcript=transcript, vision=False, log=tqdm.write)
    else:
        client = LLMClient(args.llm_url, args.llm_model, transcript=transcript, vision=args.vision,
                           log=tqdm.write)
        client.check_reachable()
    return client, server, f"{kind}: {client.url} model {client.model or '(server default)'}"


def make_train_envs(args, run: Run, cfg: PPOConfig, action_set: ActionSet, episode_numbers: list[int] = ()):
    """The run's one set of training envs, built once, grown in place, never reset by the trainer: this
    rank's share of --num-envs. Crafter tasks append every finished episode to stats.jsonl. On --resume
    (`episode_numbers` from the checkpoint) each env goes on with its next world, not its first one again.
    --mode code's program is called whatever the action mask says, so there a call that refuses costs a noop."""
    options = {} if not env.is_crafter(args.task) else {"stats_path": run.dir / "stats.jsonl",
                                                             "crafter_impl": args.crafter_impl}
    envs = env.make_vec_env(args.task, args.num_envs // run.world, code_actions=action_set.actions, seed=args.seed,
                            rank=run.rank, max_macro_steps=args.max_macro_steps, gamma=cfg.gamma,
                            free_refusals=args.mode != Mode.CODE, **options)
    if episode_numbers:
        n, rank = envs.num_envs, run.rank
        envs.set_attr("episode_number", episode_numbers[rank * n:(rank + 1) * n])
    return envs


def open_skill_library(args, api_name: str, doc: str) -> skill_library.SkillLibrary | None:
    """The skill library shared between runs (--skills; None for "none"), seeded with the reference skills."""
    skills_dir = skill_library.library_path(args.skills, args.runs_dir)
    if skills_dir is None:
        return None
    library = skill_library.SkillLibrary(skills_dir, skill_library.backend_of(args.task), api_name, doc)
    library.seed()
    print(f"skill library: {skills_dir} ({len(library.best())} skills for {library.backend}; "
          "`python skill_library.py list` shows them)")
    return library


def close(run: Run) -> None:
    """The envs, the log writer and a local LLM server: closed however the run ended."""
    run.envs.close()
    if run.writer is not None:
        run.writer.close()
    if run.server is not None:
        run.server.stop()


def running_episodes(args, envs) -> tuple[list[dict], list[int]]:
    """The episodes in progress as Crafter rows (steps taken so far) and each env's episode number,
    gathered over the ranks (every rank must call this at the same point)."""
    if not env.is_crafter(args.task):
        return [], []
    rows = [r for r in envs.call("stats_row") if r["length"] > 0]
    return distributed.all_gather(rows), distributed.all_gather(list(envs.get_attr("episode_number")))


def write_unfinished(run: Run) -> None:
    """At the end of the run: the episodes still going when the budget ran out go to unfinished.jsonl."""
    running, _ = running_episodes(run.args, run.envs)
    if run.rank == 0:
        write_rows(run.dir / "unfinished.jsonl", running)


def write_rows(path: Path, rows: list[dict]) -> None:
    with open(path, "a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))


def log_metrics(run: Run, metrics: dict, step: int) -> None:
    if run.rank:  # rank 0 alone logs
        return
    for k, v in metrics.items():
        run.writer.add_scalar(k, v, step)
    if run.wandb is not None:
        run.wandb.log(dict(metrics, global_step=step))
    with open(run.dir / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"global_step": step, "iteration": run.iteration + 1, **metrics}) + "\n")


def llm_calls(run: Run) -> int:
    """LLM calls of the whole run: those before the last resume (from the checkpoint) and this process's."""
    return run.llm_calls_before + (run.llm.calls if run.llm is not None else 0)


def save(run: Run, ppo: PPO, action_set: ActionSet, state: LoopState) -> None:
    """Called by every rank at the same point (a rollout boundary): the episodes in progress are gathered,
    so a resume can write them to unfinished.jsonl and go on with the next episode number of each env."""
    running, episode_numbers = running_episodes(run.args, run.envs)
    if run.rank:  # rank 0 alone checkpoints (all ranks hold the same weights)
        return
    logs = {name: (run.dir / name).stat().st_size for name in APPEND_LOGS if (run.dir / name).is_file()}
    # library_active: the action set's code actions in use, under the key every checkpoint has held them by
    state = dict(state.to_dict(), library_active=action_set.active, log_sizes=logs, running=running,
                 episode_numbers=episode_numbers, llm_calls=llm_calls(run))
    save_checkpoint(str(run.dir / "checkpoint.pt"), ppo, [asdict(a) for a in action_set.actions], state)


def save_checkpoint(path: str, ppo: PPO, code_actions: list[dict], extra: dict | None = None) -> None:
    """Atomic write: a crash mid-save never leaves a half-written checkpoint behind. The process's RNG
    states go with PPO's state (under "ppo", where checkpoints have always held them), so a resumed run
    samples the same actions and minibatches as one that never stopped."""
    rng = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "random": random.getstate(),
           "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}
    tmp = f"{path}.tmp"
    torch.save({"ppo": dict(ppo.state_dict(), rng=rng), "code_actions": code_actions, "extra": extra or {}}, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: str, ppo: PPO) -> tuple[list[dict], dict]:
    """Restores `ppo` and the process's RNG states in place and returns (code_actions, extra)."""
    d = torch.load(path, map_location="cpu", weights_only=False)  # RNG states must stay on CPU
    ppo.load_state_dict(d["ppo"])
    rng = d["ppo"]["rng"]
    torch.set_rng_state(rng["torch"])
    np.random.set_state(rng["numpy"])
    random.setstate(rng["random"])
    if rng["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    return d["code_actions"], d["extra"]


def resume(run: Run, ppo: PPO) -> tuple[ActionSet, LoopState, list[int]]:
    """--resume: `ppo` restored in place from checkpoint.pt; returns the action set, the loop's state and
    each env's episode number at the checkpoint. Rank 0 cuts the logs back to the checkpoint (rewind_logs)."""
    ckpt = run.dir / "checkpoint.pt"
    actions, state = load_checkpoint(str(ckpt), ppo)
    action_set = ActionSet([env.CodeAction(**a) for a in actions], state.pop("library_active"))
    running, episode_numbers = state.pop("running", []), state.pop("episode_numbers", [])
    run.llm_calls_before = state.pop("llm_calls", 0)
    if isinstance(run.llm, ReplayClient):  # a replay goes on from the call the checkpoint had reached
        run.llm.skip(run.llm_calls_before)
    if run.rank == 0:
        rewind_logs(run.dir, state.get("log_sizes", {}), running)
        print(f"resumed from {ckpt}: iteration {state['iteration'] + 1}, {ppo.global_step} env steps done"
              f" ({len(running)} episodes going on at the checkpoint went to unfinished.jsonl)")
    return action_set, LoopState.from_dict(state), episode_numbers


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


def check_ranks_agree(run_dir: Path, ppo: PPO, action_set: ActionSet, rank: int) -> None:
    """ranks.json: each rank's step count, weight hash and code actions; they must all agree."""
    weights = b"".join(t.cpu().numpy().tobytes() for t in ppo.agent.state_dict().values())
    mine = {"rank": rank, "global_step": ppo.global_step, "weights_sha256": hashlib.sha256(weights).hexdigest(),
            "code_actions": [[a.name, hashlib.sha256(a.source.encode()).hexdigest()[:16]] for a in action_set.actions]}
    ranks = distributed.all_gather([mine])
    if rank == 0:
        (run_dir / "ranks.json").write_text(json.dumps(ranks, indent=2))
        if any(dict(r, rank=0) != dict(mine, rank=0) for r in ranks):
            print(f"warning: the ranks disagree (see {run_dir / 'ranks.json'})", file=sys.stderr)


def llm_failed(run_dir: Path, error: Exception) -> int:
    """The LLM could not be used (transport, or unusable replies after every repair): say so, exit 2."""
    print(f"error: the LLM could not be used: {error}", file=sys.stderr)
    if (run_dir / "llm_transcript.jsonl").is_file():
        print(f"every request and reply is in {run_dir / 'llm_transcript.jsonl'}", file=sys.stderr)
    return 2
