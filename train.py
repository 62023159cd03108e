"""RL-GPT in one loop: the slow agent plans, the fast agent codes, PPO learns the rest, a critic reviews.

    python train.py --task collect_wood                    # hand-written reference skills, no LLM needed
    python train.py --task collect_wood --llm http         # any OpenAI-compatible endpoint, see README
    python train.py --task collect_wood --mode rl          # the plain-PPO baseline
    python train.py --task collect_wood --mode rl+config   # plain PPO with the plan's action mask and shaping
    python train.py --task collect_wood --mode code        # one program for the whole task, no RL
    python train.py --resume runs/<run_dir>                # continue an interrupted run
    python train.py --help                                 # every setting, PPO's included
    torchrun --standalone --nproc_per_node 2 train.py ...  # one run over 2 processes (see README)

One iteration (the paper's two loops):
  1. slow agent: task + primitive API doc (+ critic feedback) -> sub-actions, each "code" or "rl"
  2. fast agent: writes each code sub-action; sandbox check + dry run + repair (the fast loop)
  3. accepted code actions join PPO's action space (agent.extend; dropped ones are masked, never
     deleted, so action indices stay stable); PPO trains on this iteration's share of the budget
  4. evaluation episodes; the critic reads success, per-code-action statistics (and frames) and
     its feedback goes to the next plan (the slow loop)
Budgets, curves and tables count primitive env steps: a code action that ran 12 steps counts 12.

One set of training envs lives for the whole run: new code actions are added to it in place, and
neither an iteration's end nor a checkpoint resets it, so no episode is cut by the trainer (a cut
episode would be dropped from every statistic, and the long, failing ones are the ones cut most).
An iteration ends where its share of the budget is spent (within one vector step); PPO learns from
that last, shorter rollout like from any other, and the next iteration goes on with the same episodes.
Checkpoints are written at rollout boundaries, so they do not change what is learned. The learning
rate anneals linearly over the whole run's --total-steps: iterations do not restart it.

Under torchrun (RANK/WORLD_SIZE set) every rank steps --num-envs / WORLD_SIZE envs and trains the same
agent (ppo.py averages the gradients and sums the steps); rank 0 alone talks to the LLM and broadcasts
the plan and code actions, gathers the statistics the critic reads, evaluates, logs and checkpoints.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import hashlib
import inspect
import json
import os
import shutil
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from tqdm import tqdm

import env as E
import ppo as P
import report
import skill_library as SL
import skills
from fast_agent import FastAgent, save_attempts
from llm import LLMClient, LLMError, ReplayClient, configured_endpoint, start_local_server, validate_url
from slow_agent import AgentError, Feedback, Plan, SlowAgent, SubAction


@dataclass
class Args:
    task: str = "collect_wood"
    """task to learn (--list-tasks prints them; minedojo:<task_id> needs MineDojo installed)"""
    mode: str = "rlgpt"
    """rlgpt: code actions + PPO | rl: plain PPO, no LLM | rl+config: plain PPO with the plan's action mask
    and reward shaping, no code actions | code: one program for the whole task, no RL"""
    llm: str = "auto"
    """http | local | library | replay:<transcript.jsonl> | auto (http if an endpoint is set, else library)"""
    llm_url: str | None = None
    """OpenAI-compatible base URL (default: $RLGPT_LLM_URL or $OPENAI_BASE_URL); the key is read only
    from $OPENAI_API_KEY"""
    llm_model: str | None = None
    """model name (default: $RLGPT_LLM_MODEL)"""
    vision: bool = False
    """the model takes images: the critic then also sees frames of a failed evaluation episode"""
    iterations: int = 3
    """RL-GPT iterations (the slow loop); the env-step budget is split evenly over them"""
    total_steps: int = 40_000
    """primitive env steps for the whole run, every step of every code action included"""
    num_envs: int = 8
    """parallel environments (under torchrun: in total, split evenly over the ranks)"""
    seed: int = 1
    """seed of everything; each training episode's world is drawn from (seed, rank, env, episode), the
    evaluation worlds from another stream (env.world_seed)"""
    device: str = "auto"
    """auto (CUDA when available) | cpu | cuda"""
    threads: int = 1
    """torch CPU threads; 1 is fastest when the envs step in the same process on a small machine
    (measured: 2 threads on 2 busy cores made the update 10-40x slower)"""
    max_macro_steps: int = 64
    """most env steps one call of a code action may take"""
    eval_episodes: int = 8
    """evaluation episodes after each iteration (fresh worlds, sampled policy)"""
    checkpoint_every: int = 10_000
    """env steps between checkpoints (a crash loses about this much); written at the first rollout
    boundary past each multiple, so they never change what is learned"""
    capture_video: bool = True
    """write a GIF of one evaluation episode per iteration"""
    track: bool = False
    """also log to Weights & Biases (needs `pip install wandb`; never required)"""
    runs_dir: str = "runs"
    """where run directories are created"""
    run_name: str | None = None
    """the run directory's name (default: <task>__<mode>__<seed>__<unix time>)"""
    skills: str = ""
    """skill library shared between runs (default: <runs-dir>/skills); "none": use and keep none"""
    resume: str | None = None
    """a run directory to continue from its last checkpoint"""
    list_tasks: bool = False
    """print the tasks and exit"""
    crafter_impl: str = "fast"
    """fast: fastcrafter.Env, the same game bit for bit, several times faster | original: crafter.Env"""


MODES, BACKENDS = ("rlgpt", "rl", "rl+config", "code"), ("auto", "http", "local", "library")
APPEND_LOGS = ("metrics.jsonl", "stats.jsonl", "unfinished.jsonl", "eval.jsonl")  # rewound on --resume
# What --resume may change: where the LLM is and the budget; everything else shapes the saved state.
RESUMABLE = {"llm", "llm_url", "llm_model", "vision", "iterations", "total_steps", "device", "threads",
             "eval_episodes", "checkpoint_every", "capture_video", "track", "resume"}


# ----------------------------------------------------------------------------------------------
# Command line: --help is generated from the two dataclasses' field docstrings.


def _field_docs(cls: type) -> dict[str, str]:
    """The string literal under each field, as CleanRL's tyro shows it: the source is the doc."""
    body = ast.parse(inspect.getsource(cls)).body[0].body
    return {a.target.id: " ".join(b.value.value.split()) for a, b in zip(body, body[1:], strict=False)
            if isinstance(a, ast.AnnAssign) and isinstance(b, ast.Expr) and isinstance(b.value.value, str)}


def _add_fields(parser: argparse.ArgumentParser, cls: type, skip: set[str] = frozenset()) -> None:
    docs = _field_docs(cls)
    group = parser.add_argument_group(cls.__name__)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        flag, typ = "--" + f.name.replace("_", "-"), f.type.split(" |")[0]
        if typ == "bool":
            group.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=docs.get(f.name))
        else:
            group.add_argument(flag, type={"int": int, "float": float}.get(typ, str), default=f.default,
                               help=f"{docs.get(f.name, '')} (default: {f.default})", dest=f.name)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_fields(parser, Args)
    _add_fields(parser, P.PPOConfig)
    return parser


def parse_args(argv: list[str] | None = None) -> tuple[Args, P.PPOConfig, argparse.ArgumentParser]:
    parser = make_parser()
    ns = vars(parser.parse_args(argv))
    args = Args(**{f.name: ns[f.name] for f in dataclasses.fields(Args)})
    cfg = P.PPOConfig(**{f.name: ns[f.name] for f in dataclasses.fields(P.PPOConfig)})
    return args, cfg, parser


def given_flags(argv: list[str] | None) -> set[str]:
    """The settings the user typed, told apart from argparse's defaults by parsing again with a
    sentinel as every default."""
    unset, parser = object(), make_parser()
    parser.set_defaults(**{a.dest: unset for a in parser._actions if a.dest != "help"})
    return {name for name, value in vars(parser.parse_args(argv)).items() if value is not unset}


def resumed_args(args: Args, cfg: P.PPOConfig, argv: list[str] | None,
                 parser: argparse.ArgumentParser) -> tuple[Args, P.PPOConfig]:
    """The saved run's settings, updated by the flags given now: those in RESUMABLE (a new endpoint,
    model or larger budget) replace the saved ones; any other flag must repeat its saved value."""
    cfg_path = Path(args.resume) / "config.json"
    if not cfg_path.is_file():
        parser.error(f"--resume {args.resume}: no config.json there (not a run directory?)")
    saved = json.loads(cfg_path.read_text())
    unknown = sorted({*(set(saved["args"]) - {f.name for f in dataclasses.fields(Args)}),
                      *(set(saved["ppo"]) - {f.name for f in dataclasses.fields(P.PPOConfig)})})
    if unknown:
        parser.error(f"--resume {args.resume}: its config.json has settings this version does not know "
                     f"({', '.join(unknown)}): it was written by another version of train.py; start a new run")
    old, now = {**saved["ppo"], **saved["args"]}, {**asdict(cfg), **asdict(args)}
    flag = lambda name: "--" + name.replace("_", "-")
    given = given_flags(argv) - {"list_tasks"}
    fixed = [f"{flag(n)} (the run has {old[n]!r}, not {now[n]!r})" for n in sorted(given - RESUMABLE)
             if n in old and old[n] != now[n]]
    fixed += [f"{flag(n)} may only grow (the run has {old[n]})" for n in ("iterations", "total_steps")
              if n in given and now[n] < old[n]]
    if fixed:
        parser.error(f"--resume {args.resume} cannot change {'; '.join(fixed)}: start a new run for that")
    finished = (Path(args.resume) / "summary.md").is_file()  # written once the last iteration is done
    iterations = now["iterations"] if "iterations" in given else old["iterations"]
    if finished and "total_steps" in given and now["total_steps"] > old["total_steps"] \
            and iterations <= old["iterations"]:
        parser.error(f"--resume {args.resume}: the run finished its {old['iterations']} iterations; a larger "
                     "--total-steps needs a larger --iterations too (the new steps go to the new iterations)")
    changed = {n: now[n] for n in sorted(given & RESUMABLE - {"resume"}) if now[n] != old.get(n)}
    if changed:
        print("resuming with " + ", ".join(f"{flag(n)} {v} (was {old.get(n)})" for n, v in changed.items()))
    return Args(**{**saved["args"], **changed, "resume": args.resume}), P.PPOConfig(**saved["ppo"])


def validate(args: Args, cfg: P.PPOConfig, parser: argparse.ArgumentParser) -> None:
    """Bad input ends here with exit code 2 and a sentence, never with a traceback later."""
    if cfg.precision not in P.PRECISIONS:
        parser.error(f"--precision must be one of {P.PRECISIONS}, not {cfg.precision!r}")
    if args.mode not in MODES:
        parser.error(f"--mode must be one of {MODES}, not {args.mode!r}")
    if args.llm not in BACKENDS and not args.llm.startswith("replay:"):
        parser.error(f"--llm must be one of {BACKENDS} or replay:<transcript.jsonl>, not {args.llm!r}")
    if args.llm.startswith("replay:") and not Path(args.llm[7:]).is_file():
        parser.error(f"--llm {args.llm}: no such transcript file")
    url = args.llm_url or configured_endpoint()
    if args.mode != "rl" and args.llm == "http" and not url:
        parser.error("--llm http needs an endpoint: --llm-url or RLGPT_LLM_URL (e.g. http://127.0.0.1:8080/v1)")
    if args.mode != "rl" and args.llm in ("http", "auto") and url:
        try:
            validate_url(url)
        except LLMError as e:
            parser.error(str(e))
    for name in ("iterations", "total_steps", "num_envs", "max_macro_steps", "checkpoint_every", "threads"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive, not {getattr(args, name)}")
    if args.seed < 0:
        parser.error(f"--seed must be 0 or more, not {args.seed}")
    if args.num_envs % int(os.environ.get("WORLD_SIZE", 1)):
        parser.error(f"--num-envs {args.num_envs} does not split evenly over {os.environ['WORLD_SIZE']} ranks")
    skills_dir = SL.library_path(args.skills, args.runs_dir)
    if skills_dir is not None and args.mode == "rlgpt":
        if args.run_name and (Path(args.runs_dir) / args.run_name).resolve() == skills_dir.resolve():
            parser.error(f"--run-name {args.run_name}: that is the skill library's directory; pick another")
        # checked, not created: a run stopped by a later check leaves nothing behind
        existing = next(p for p in (skills_dir, *skills_dir.parents) if p.exists())
        if not (existing.is_dir() and os.access(existing, os.W_OK)):
            parser.error(f"--skills {skills_dir}: cannot use it as the skill library directory "
                         f"({existing} is not a writable directory)")
    if args.crafter_impl not in E.CRAFTER_IMPLS:
        parser.error(f"--crafter-impl must be one of {E.CRAFTER_IMPLS}, not {args.crafter_impl!r}")
    if args.device not in ("auto", "cpu", "cuda"):
        parser.error(f"--device must be auto, cpu or cuda, not {args.device!r}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible to torch")
    if args.task.startswith("minedojo:"):
        try:
            E.make_env(args.task).close()
        except ImportError as e:
            parser.error(str(e))
    else:
        try:
            E.get_task(args.task)
        except ValueError as e:
            parser.error(str(e))


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


def make_llm(args: Args, run_dir: Path):
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


# ----------------------------------------------------------------------------------------------
# Code actions across iterations: append-only, so PPO's action indices never change meaning.


@dataclass
class Library:
    actions: list[E.CodeAction] = field(default_factory=list)
    active: dict[str, str] = field(default_factory=dict)  # sub-action name -> code action name in use

    def add(self, sub: str, action: E.CodeAction) -> E.CodeAction:
        """A rewritten sub-action gets a new versioned name; its old version stays, masked."""
        current = next((a for a in self.actions if a.name == self.active.get(sub)), None)
        if current is not None and current.source == action.source:
            return current  # the "rewrite" changed nothing: keep the action the agent already knows
        taken = {a.name for a in self.actions}
        name, v = sub, 1
        while name in taken:
            v += 1
            name = f"{sub}_v{v}"
        action = dataclasses.replace(action, name=name, entry=action.function,
                                     replaces=current.name if current is not None else "")
        self.actions.append(action)
        self.active[sub] = name
        return action

    def mask(self, n_base: int, masked_base: list[str]) -> np.ndarray:
        """Allowed actions: the env's own ones (less those the plan masks by name) and the code actions in use."""
        live = set(self.active.values())
        base = [i >= len(E.ACTIONS) or E.ACTIONS[i] not in masked_base for i in range(n_base)]
        return np.array(base + [a.name in live for a in self.actions], dtype=bool)


class CodeStats:
    """What the critic reads about each code action: how often chosen, how often it worked, its cost."""

    def __init__(self, library: Library):
        self.library, self.decisions = library, 0
        self.rows: dict[str, dict] = {}

    def _row(self, name: str) -> dict:
        return self.rows.setdefault(name, {"chosen": 0, "ok": 0, "steps": 0, "errors": Counter()})

    def __call__(self, actions: np.ndarray, infos: dict) -> None:
        n = len(actions)
        self.decisions += n
        which, ok, steps, err = (P.step_info(infos, k, d, n) for k, d in (
            ("code_action", -1), ("code_ok", False), ("prim_steps", 1), ("code_error", "")))
        for i in np.flatnonzero(which >= 0):
            row = self._row(self.library.actions[int(which[i])].name)
            row["chosen"] += 1
            row["ok"] += bool(ok[i])
            row["steps"] += int(steps[i])
            if err[i]:
                row["errors"][str(err[i]).splitlines()[0][:160]] += 1

    def gather(self) -> None:
        """Sum every rank's counts so the critic reads the whole run (a no-op on one process)."""
        parts, self.decisions, self.rows = P.all_gather([(self.decisions, self.rows)]), 0, {}
        for decisions, rows in parts:
            self.decisions += decisions
            for name, r in rows.items():
                row = self._row(name)
                for key in row:
                    row[key] += r[key]

    def summary(self) -> dict:
        return {name: {"chosen": r["chosen"], "share": round(r["chosen"] / max(1, self.decisions), 4),
                       "success_rate": round(r["ok"] / r["chosen"], 3),
                       "mean_steps": round(r["steps"] / r["chosen"], 2),
                       "errors": [list(e) for e in r["errors"].most_common(3)]}
                for name, r in self.rows.items()}


# ----------------------------------------------------------------------------------------------
# The run's one set of training envs: built once, grown in place, never reset by the trainer.


def make_train_envs(args: Args, run: dict, cfg: P.PPOConfig, library: Library):
    """This rank's share of --num-envs. Crafter tasks append every finished episode to stats.jsonl."""
    options = {} if args.task.startswith("minedojo:") else {"stats_path": run["dir"] / "stats.jsonl",
                                                             "crafter_impl": args.crafter_impl}
    return E.make_vec_env(args.task, args.num_envs // run["world"], code_actions=library.actions, seed=args.seed,
                          rank=run["rank"], max_macro_steps=args.max_macro_steps, gamma=cfg.gamma, **options)


def is_crafter(args: Args) -> bool:
    return not args.task.startswith("minedojo:")


def running_episodes(args: Args, envs) -> tuple[list[dict], list[int]]:
    """The episodes in progress as Crafter rows (steps taken so far) and each env's episode number,
    gathered over the ranks (every rank must call this at the same point)."""
    if not is_crafter(args):
        return [], []
    rows = [r for r in envs.call("stats_row") if r["length"] > 0]
    return P.all_gather(rows), P.all_gather(list(envs.get_attr("episode_number")))


def write_rows(path: Path, rows: list[dict]) -> None:
    with open(path, "a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))


# ----------------------------------------------------------------------------------------------
# Evaluation and the whole-task program of --mode code.


def evaluate(agent: P.Agent, args: Args, library: Library, mask: np.ndarray, iteration: int, gamma: float,
             fixed_action: int | None = None) -> dict:
    """Fresh worlds from the evaluation seed stream (training never plays them), the sampled policy;
    returns Crafter rows of the episodes, the frames of the first episode (for the GIF) and of the
    first failed one (for a vision critic)."""
    options = {"stream": E.EVAL, "index": iteration} if is_crafter(args) else {}
    env = E.make_env(args.task, args.seed, code_actions=library.actions, max_macro_steps=args.max_macro_steps,
                     gamma=gamma, crafter_impl=args.crafter_impl, **options)
    env.unwrapped.frames = []
    env.unwrapped.iteration = iteration + 1  # 1-based, as iter_1/ and the log
    device = next(agent.parameters()).device
    results, rows, first_frames, failed_frames = [], [], None, None
    for ep in range(args.eval_episodes):
        seed = None if is_crafter(args) else 10_000_000 + 1000 * args.seed + 100 * iteration + ep
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            if fixed_action is not None:
                action = fixed_action
            else:
                with torch.no_grad():
                    t = {k: torch.as_tensor(v[None], device=device) for k, v in obs.items()}
                    m = torch.as_tensor(mask[None], device=device)
                    action = int(agent.get_action_and_value(t, mask=m)[0].item())
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        results.append(info["episode"])
        if is_crafter(args):
            rows.append(env.unwrapped.stats_row())
        first_frames = first_frames or list(env.unwrapped.frames)
        if not info["episode"]["success"] and failed_frames is None:
            failed_frames = list(env.unwrapped.frames)
    env.close()
    return {"success_rate": float(np.mean([r["success"] for r in results])),
            "mean_length": float(np.mean([r["l"] for r in results])),
            "mean_return": float(np.mean([r["r"] for r in results])),
            "env_steps": int(sum(r["l"] for r in results)), "rows": rows,
            "frames": first_frames or [], "failed_frames": failed_frames or []}


def run_program(run: dict, ppo: P.PPO, action: int, steps: int, on_step, progress, on_log, on_update) -> dict:
    """--mode code: every decision calls the one program, on the run's envs (reset once, when first
    used); the same budget, step count and statistics as PPO, logged every num_steps vector steps."""
    envs, log_every = run["envs"], ppo.cfg.num_steps
    if not run["envs_started"]:
        envs.reset()
        run["envs_started"] = True
    start, episodes, logged, vector_steps = ppo.global_step, [], 0, 0
    while ppo.global_step - start < steps:
        actions = np.full(envs.num_envs, action)
        _, _, _, _, infos = envs.step(actions)
        n = P.sum_over_ranks(int(P.step_info(infos, "prim_steps", 1, len(actions)).sum()))
        ppo.global_step += n
        vector_steps += 1
        on_step(actions, infos)
        progress(n)
        final = infos.get("final_info", {})
        if "episode" in final:
            episodes += [bool(final["episode"]["success"][i]) for i in np.flatnonzero(final["_episode"])]
        if vector_steps % log_every == 0 or ppo.global_step - start >= steps:
            episodes[logged:] = P.all_gather(episodes[logged:])
            if len(episodes) > logged:
                on_log({"charts/success_rate": float(np.mean(episodes[logged:])),
                        "charts/success_episodes": len(episodes) - logged}, ppo.global_step)
            logged = len(episodes)
            on_update(ppo.global_step)
    return {"env_steps": ppo.global_step - start, "episodes": len(episodes), "success_episodes": len(episodes),
            "success_rate": float(np.mean(episodes)) if episodes else float("nan")}


def whole_task_subaction(args: Args) -> SubAction:
    task = E.get_task(args.task) if not args.task.startswith("minedojo:") else None
    chain = ", ".join(task.prerequisites) if task else "(see the task)"
    return SubAction(
        name="solve_task", how="code", reason="--mode code: the pure code-as-policy baseline",
        spec=f"Solve the whole task: {task.description if task else args.task} Achievements usually "
             f"needed first, in order: {chain}. The function is called again and again until the episode "
             f"ends; one call may take at most {args.max_macro_steps} env steps, so make one step of "
             "progress (explore when nothing useful is visible) and return True when it made progress.")


# ----------------------------------------------------------------------------------------------
# The run.


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


def log_rejections(k: int, what: str, slow: SlowAgent) -> None:
    """One line per reply the slow agent rejected, in the user's words (the model got its own)."""
    for n, problem in enumerate(slow.last_rejections, 1):
        tqdm.write(f"[iter {k + 1}] {what} reply {n} rejected: {problem[:200]}")


def agents_phase(args, run, slow, fast, library, state, doc) -> None:
    """Steps 1-2 of an iteration: (re)plan, then write every code sub-action not yet accepted."""
    k, it_dir = state["iteration"], run["dir"] / f"iter_{state['iteration'] + 1}"  # as the log: [iter 1]
    (it_dir / "skills").mkdir(parents=True, exist_ok=True)
    feedback = Feedback.from_dict(state["feedback"]) if state["feedback"] else None
    if args.mode == "code":
        subs = [whole_task_subaction(args)]
        plan = Plan(args.task, [], subs, {"shaping": {}, "mask_actions": []})
    else:
        previous = Plan.from_dict(state["plan"]) if state["plan"] else None
        if run["skills"] is not None:  # read again every iteration: other runs may have added skills
            slow.library = run["skills"].catalogue(args.task)
        try:
            if run["llm"] is not None:  # LLM calls can take minutes: say what we are waiting for
                tqdm.write(f"[iter {k + 1}] asking the slow agent for a plan ...")
            plan = slow.plan(E.get_task(args.task), doc, feedback=feedback, previous=previous)
        except (LLMError, AgentError) as e:
            if previous is None:
                raise
            tqdm.write(f"[iter {k + 1}] planning failed ({e}); carrying on with the last good plan")
            plan = previous
        finally:
            log_rejections(k, "plan", slow)
        subs = [] if args.mode == "rl+config" else plan.code_subactions  # rl+config: the plan's RL config only
    state["plan"] = plan.to_dict()
    (it_dir / "plan.json").write_text(json.dumps(state["plan"], indent=2))
    for sub in subs:
        fix = feedback.fixes.get(sub.name) if feedback else None
        if sub.name in library.active and not fix:
            continue  # accepted before and the critic is happy with it
        action = None
        if args.mode == "code" and run["llm"] is None:
            action = skills.whole_task_program(args.task, args.max_macro_steps)
        elif sub.reuse and not fix and (action := reuse_skill(run, fast, sub, k)):
            state["reused"] = state.get("reused", []) + [sub.name]
        else:
            if run["llm"] is not None:
                tqdm.write(f"[iter {k + 1}] asking the fast agent to write {sub.name!r} ...")
            examples = run["skills"].related(f"{args.task} {sub.name} {sub.spec}") if run["skills"] else None
            action = fast.write(sub, doc, feedback=fix, examples=examples)
            save_attempts(fast.last_attempts, it_dir / "attempts", sub.name)
            for n, a in enumerate(fast.last_attempts, 1):
                if a.error:
                    tqdm.write(f"[iter {k + 1}] {sub.name} attempt {n} failed: {a.error.splitlines()[0][:160]}")
        if action is None:
            saved = f" (attempts in {it_dir / 'attempts'})" if (it_dir / "attempts").is_dir() else ""
            tqdm.write(f"[iter {k + 1}] no working code for {sub.name!r}: it is left to RL{saved}")
            library.active.pop(sub.name, None)
            continue
        action = library.add(sub.name, action)
        (it_dir / "skills" / f"{action.name}.py").write_text(action.source)
    for name in [n for n in library.active if n not in {s.name for s in subs}]:
        library.active.pop(name)  # the plan moved it to RL: masked from now on
    tqdm.write(f"[iter {k + 1}] plan: {len(plan.subactions)} sub-actions; code actions in use: "
               f"{', '.join(library.active.values()) or 'none'}")


def reuse_skill(run: dict, fast: FastAgent, sub: SubAction, k: int) -> E.CodeAction | None:
    """The plan said "reuse": the library's best version, through the same sandbox check and dry run
    as new code; if it fails them (or no library is in use), the fast agent writes the sub-action after all."""
    if run["skills"] is None:
        return None
    action, why = run["skills"].reuse(sub.name, fast.check_and_dry_run)
    tqdm.write(f"[iter {k + 1}] {sub.name!r}: " + (f"reused {why} from the skill library, no LLM call" if action
                                                  else f"not reused ({why}): the fast agent writes it"))
    return action


def plan_rl_config(args: Args, state: dict) -> dict:
    """The plan's action mask and reward shaping, in the modes that use them (rlgpt and rl+config)."""
    if args.mode not in ("rlgpt", "rl+config") or not state["plan"]:
        return {}
    return Plan.from_dict(state["plan"]).rl_config


def train_iteration(args: Args, run: dict, ppo: P.PPO, library: Library, state: dict) -> None:
    """Steps 3-4 of an iteration: RL on this iteration's share of the budget, evaluation, the critic."""
    k, t0 = state["iteration"], time.time()
    n_base = ppo.agent.n_actions - len(library.actions)
    plan = Plan.from_dict(state["plan"]) if state["plan"] else None
    rl_config = plan_rl_config(args, state)
    mask = library.mask(n_base, rl_config.get("mask_actions", []))
    envs = run["envs"]
    if is_crafter(args):  # the plan's shaping, and the iteration the stats rows name (the one they end in)
        envs.call("set_shaping", rl_config.get("shaping"))
        envs.set_attr("iteration", k + 1)  # 1-based, as iter_1/ and the log
    program = n_base + library.actions.index(
        next(a for a in library.actions if a.name == library.active["solve_task"])) \
        if args.mode == "code" and "solve_task" in library.active else None
    start, target = args.total_steps * k // args.iterations, args.total_steps * (k + 1) // args.iterations
    bar = tqdm(total=target - start, initial=min(target, ppo.global_step) - start, unit="step",
               desc=f"iter {k + 1}/{args.iterations}", dynamic_ncols=True,
               mininterval=0.5 if sys.stderr.isatty() else 30,  # a log file gets a line every 30 s
               disable=run["rank"] > 0)
    stats, trend, last = CodeStats(library), [], [None]

    def on_log(metrics: dict, step: int) -> None:
        log_metrics(run, metrics, step)
        if "charts/success_rate" in metrics:  # the episodes that finished in this update, and how many
            trend.append(round(metrics["charts/success_rate"], 3))
            last[0] = f"{trend[-1]:.2f} (n={metrics['charts/success_episodes']})"
        bar.set_postfix(SPS=metrics.get("charts/SPS"), success=last[0], llm=llm_calls(run))

    def on_update(step: int) -> None:  # at a rollout boundary: checkpoint once past each multiple
        # not at the iteration's last update: main() saves after evaluation and the critic, so a resume never
        # starts an iteration whose training is done but whose statistics (not in the checkpoint) are lost
        if step < target and step // args.checkpoint_every > run["checkpoint_mark"]:
            run["checkpoint_mark"] = step // args.checkpoint_every
            save(run, ppo, library, state)

    if ppo.global_step >= target:
        result = {"episodes": 0, "success_episodes": 0, "success_rate": float("nan")}
    elif args.mode == "code" and program is None:  # no program was accepted: nothing runs, no step counts
        result = {"episodes": 0, "success_episodes": 0, "success_rate": float("nan")}
    elif args.mode == "code":
        result = run_program(run, ppo, program, target - ppo.global_step, stats, bar.update, on_log, on_update)
    else:
        result = ppo.train(envs, target - ppo.global_step, action_mask=mask, on_log=on_log, on_step=stats,
                           progress=bar.update, on_update=on_update)
    bar.close()
    stats.gather()
    if run["rank"]:  # evaluation, the critic and the run directory are rank 0's
        return
    if run["skills"] is not None:  # after every iteration, so a crash loses at most this one's numbers
        try:
            run["skills"].record_iteration(library.actions, stats.rows, task=args.task,
                                           run=str(run["dir"].resolve()), iteration=k + 1)
        except OSError as e:
            tqdm.write(f"[iter {k + 1}] warning: the skill library could not be written ({e}); the run goes on")

    ev = evaluate(ppo.agent, args, library, mask, k, ppo.cfg.gamma, fixed_action=program)
    write_rows(run["dir"] / "eval.jsonl", ev["rows"])
    log_metrics(run, {"eval/success_rate": ev["success_rate"], "eval/episodic_length": ev["mean_length"],
                      "eval/episodic_return": ev["mean_return"]}, ppo.global_step)
    for name, row in stats.summary().items():
        log_metrics(run, {f"code/{name}/share": row["share"], f"code/{name}/success_rate": row["success_rate"]},
                    ppo.global_step)
    it_dir = run["dir"] / f"iter_{k + 1}"
    it_dir.mkdir(exist_ok=True)
    if args.capture_video and ev["frames"]:
        report.write_gif(it_dir / "eval.gif", ev["frames"])
    n_train = result["success_episodes"]  # training success: the episodes that finished in this iteration
    train_success = round(result["success_rate"], 3) if n_train else None
    critic_stats = {"task": args.task, "mode": args.mode, "iteration": k + 1, "env_steps": ppo.global_step,
                    "success_rate": train_success, "success_episodes": n_train, "success_trend": trend[-10:],
                    "eval_success_rate": ev["success_rate"], "eval_episodes": args.eval_episodes,
                    "mean_episode_length": ev["mean_length"], "code_actions": stats.summary()}
    (it_dir / "stats.json").write_text(json.dumps(critic_stats, indent=2))
    state["history"].append({"iteration": k + 1, "env_steps": ppo.global_step,
                             "train_success": train_success, "train_episodes": n_train,
                             "eval_success": ev["success_rate"],
                             "eval_length": ev["mean_length"], "eval_env_steps": ev["env_steps"],
                             "code_actions": list(library.active.values()), "rl_config": rl_config,
                             "llm_calls": llm_calls(run), "reused": state.get("reused", []),
                             "n_actions": ppo.agent.n_actions,
                             "wall_s": round(time.time() - t0, 1)})
    shown = "-" if train_success is None else f"{train_success:.2f}"
    tqdm.write(f"[iter {k + 1}] env steps {ppo.global_step}: train success {shown} (n={n_train}), "
               f"eval success {ev['success_rate']:.2f} (n={args.eval_episodes})")
    if args.mode == "rl" or k + 1 == args.iterations:
        return
    frames = report.png_frames(ev["failed_frames"]) if args.vision else None
    active = [a for a in library.actions if a.name in library.active.values()]
    try:
        if run["llm"] is not None:
            tqdm.write(f"[iter {k + 1}] asking the critic ...")
        feedback = run["slow"].critique(plan, active, critic_stats, frames)
    except (LLMError, AgentError) as e:
        tqdm.write(f"[iter {k + 1}] the critic failed ({e}); the next plan goes without feedback")
        return
    finally:
        log_rejections(k, "critic", run["slow"])
    state["feedback"] = feedback.to_dict()
    (it_dir / "feedback.json").write_text(json.dumps(state["feedback"], indent=2))
    tqdm.write(f"[iter {k + 1}] critic: {feedback.summary}")


def grow_actions(args: Args, run: dict, ppo: P.PPO, library: Library, state: dict, n_base: int) -> None:
    """New code actions join the agent (Agent.extend) and the run's envs (in place, no reset). A rewrite
    (v2) starts from the logit row of the version it replaces; a new action's prior is taken over the
    actions this iteration's mask allows."""
    agent = ppo.agent
    grow = n_base + len(library.actions) - agent.n_actions
    if grow <= 0:
        return
    names = [a.name for a in library.actions]
    copy_from = [n_base + names.index(a.replaces) if a.replaces in names else None
                 for a in library.actions[-grow:]]
    old_mask = library.mask(n_base, plan_rl_config(args, state).get("mask_actions", []))[:agent.n_actions]
    agent.extend(grow, prior=ppo.cfg.new_action_prior, obs=ppo.next_obs, mask=old_mask, copy_from=copy_from)
    E.set_vec_code_actions(run["envs"], library.actions)


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


def main(argv: list[str] | None = None) -> int:
    args, cfg, parser = parse_args(argv)
    if args.list_tasks:
        return E.main(["--list"])
    if args.resume:
        args, cfg = resumed_args(args, cfg, argv, parser)
    validate(args, cfg, parser)
    device = "cuda" if args.device == "auto" and torch.cuda.is_available() else args.device.replace("auto", "cpu")
    rank, world, device = init_distributed(device)
    P.seed_everything(args.seed)  # every rank builds the same initial weights
    torch.set_num_threads(args.threads)

    run_dir, created = Path(args.resume) if args.resume else None, False
    if run_dir is None and rank == 0:
        name = args.run_name or f"{args.task.replace(':', '-')}__{args.mode}__{args.seed}__{int(time.time())}"
        run_dir = Path(args.runs_dir) / name
        if (run_dir / "config.json").exists():
            parser.error(f"{run_dir} already holds a run: --resume it, or pick another --run-name")
        created = not run_dir.exists()
        run_dir.mkdir(parents=True, exist_ok=True)
    run_dir = P.broadcast(run_dir)  # under torchrun: rank 0's name (the unix time may differ per rank)
    llm, server, backend = None, None, None
    if rank == 0:
        try:
            llm, server, backend = make_llm(args, run_dir)
        except LLMError as e:
            print(f"error: {e}", file=sys.stderr)
            if created:  # nothing ran: leave no empty run directory behind
                shutil.rmtree(run_dir, ignore_errors=True)
            return 2
        print(f"run directory: {run_dir}\nmode: {args.mode}; agents' backend: {backend}; device: {device}"
              + (f" (x{world} ranks under torchrun)" if world > 1 else ""))
    if rank == 0:  # on --resume too: the settings it changed hold for the next resume
        (run_dir / "config.json").write_text(json.dumps(
            {"args": asdict(args), "ppo": asdict(cfg), "backend": backend, "device": device,
             "bf16_update": P.use_bf16(cfg.precision, torch.device(device))}, indent=2))

    from torch.utils.tensorboard import SummaryWriter

    run = {"dir": run_dir, "writer": SummaryWriter(str(run_dir)) if rank == 0 else None, "wandb": None,
           "iteration": 0, "llm": llm, "rank": rank, "world": world, "args": args, "skills": None,
           "llm_calls_before": 0}
    if args.track and rank == 0:
        import wandb

        run["wandb"] = wandb.init(project="rlgpt", name=run_dir.name, config=asdict(args), dir=str(run_dir))

    probe = E.make_env(args.task, crafter_impl=args.crafter_impl)
    n_base = probe.action_space.n  # the env's own actions; code actions come after them
    agent = P.Agent(probe.observation_space, n_base)
    api = type(probe.unwrapped.make_api(0))
    doc = E.api_doc(api)
    probe.close()
    skills_dir = SL.library_path(args.skills, args.runs_dir)
    if rank == 0 and args.mode == "rlgpt" and skills_dir is not None:
        run["skills"] = SL.SkillLibrary(skills_dir, SL.backend_of(args.task), api.__name__, doc)
        run["skills"].seed()
        print(f"skill library: {skills_dir} ({len(run['skills'].best())} skills for {run['skills'].backend}; "
              "`python skill_library.py list` shows them)")
    ppo = P.PPO(agent, cfg, device=device, total_steps=args.total_steps)
    library = Library()
    state = {"iteration": 0, "phase": "plan", "plan": None, "feedback": None, "history": []}
    ckpt = run_dir / "checkpoint.pt"
    episode_numbers = []
    if args.resume and ckpt.is_file():
        actions, state = P.load_checkpoint(str(ckpt), ppo)
        library = Library([E.CodeAction(**a) for a in actions], state.pop("library_active"))
        running, episode_numbers = state.pop("running", []), state.pop("episode_numbers", [])
        run["llm_calls_before"] = state.pop("llm_calls", 0)
        if rank == 0:
            rewind_logs(run_dir, state.get("log_sizes", {}), running)
            print(f"resumed from {ckpt}: iteration {state['iteration'] + 1}, {ppo.global_step} env steps done"
                  f" ({len(running)} episodes going on at the checkpoint went to unfinished.jsonl)")
    run["envs"], run["envs_started"] = make_train_envs(args, run, cfg, library), False
    run["checkpoint_mark"] = ppo.global_step // args.checkpoint_every
    if episode_numbers:  # go on with each env's next world, not its first one again
        n = run["envs"].num_envs
        run["envs"].set_attr("episode_number", episode_numbers[rank * n:(rank + 1) * n])
    if rank:  # ...and samples its own actions (a checkpoint holds rank 0's RNG state)
        P.seed_everything(args.seed + 1000 * rank + ppo.global_step)
    dry_run_options = {"crafter_impl": args.crafter_impl} if is_crafter(args) else {}
    slow = SlowAgent(llm)
    fast = FastAgent(llm, dry_run_task=args.task, dry_run_steps=args.max_macro_steps, dry_run_options=dry_run_options)
    run["slow"] = slow
    try:
        while state["iteration"] < args.iterations:
            run["iteration"] = state["iteration"]
            if state["phase"] == "plan":
                if args.mode != "rl" and rank == 0:
                    agents_phase(args, run, slow, fast, library, state, doc)
                if world > 1:  # every rank gets rank 0's plan and code actions, in the same order
                    state, actions, active = P.broadcast([state, [asdict(a) for a in library.actions],
                                                          library.active])
                    library = Library([E.CodeAction(**a) for a in actions], active)
                grow_actions(args, run, ppo, library, state, n_base)
                state["phase"] = "train"
                save(run, ppo, library, state)
            train_iteration(args, run, ppo, library, state)
            state["iteration"] += 1
            state["phase"] = "plan"
            save(run, ppo, library, state)
        running, _ = running_episodes(args, run["envs"])
        if rank == 0:  # the episodes still going when the budget ran out
            write_rows(run_dir / "unfinished.jsonl", running)
    except KeyboardInterrupt:
        print(f"\ninterrupted: resume with  python train.py --resume {run_dir}", file=sys.stderr)
        return 130
    except (LLMError, AgentError) as e:
        print(f"error: the LLM could not be used: {e}", file=sys.stderr)
        if (run_dir / "llm_transcript.jsonl").is_file():
            print(f"every request and reply is in {run_dir / 'llm_transcript.jsonl'}", file=sys.stderr)
        return 2
    finally:
        run["envs"].close()
        if run["writer"] is not None:
            run["writer"].close()
        if server is not None:
            server.stop()
    if world > 1:
        check_ranks_agree(run_dir, ppo, library, rank)
        dist.destroy_process_group()
        if rank:
            return 0
    report.write_summary(run_dir, state["history"], args)
    print(f"done: {ppo.global_step} env steps; summary in {run_dir / 'summary.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
