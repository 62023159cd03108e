"""The run directory: metrics and episode logs, checkpoints, and what --resume needs to go on from them.

Every file a run writes besides the per-iteration plans and code lives here, with the rules that keep
them consistent over a crash and a resume: the append-only logs are cut back to the checkpoint's sizes,
the episodes going on at a checkpoint are written to unfinished.jsonl, and under torchrun rank 0 alone
writes while every rank gathers at the same points. Also here: choosing the LLM backend (the one thing
main() sets up before the first file is written), what an iteration counts and logs as it trains
(IterationTally), and what it writes after evaluation.

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
import evidence
import report
import skill_library
from code_actions import ActionSet, CodeStats
from core import Mode
from fast_agent import save_attempts
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


# ----------------------------------------------------------------------------------------------
# What an iteration counts while it trains, and what it writes after evaluation.


class IterationTally:
    """What one iteration has counted: the training episodes that finished in it (and how many succeeded),
    the success trend, the code actions' statistics (CodeStats); its progress bar and metric logging. A
    checkpoint inside the iteration keeps the counts (checkpoint()), so a resume goes on counting from there. The
    bar shows the last update's success, or on `crafter` (no goal) the score so far (evidence.RunningScore)."""

    def __init__(self, run: Run, action_set: ActionSet, progress: dict | None, total: int, initial: int, desc: str):
        self.run, self.stats, self.trend, self.last = run, CodeStats(action_set), [], None
        self.score = evidence.RunningScore(run.dir / "stats.jsonl", run.iteration + 1) \
            if run.rank == 0 and evidence.no_goal(run.args.task) else None
        self.counted = {"episodes": 0, "successes": 0}
        if progress is not None and run.rank == 0:  # rank 0 holds every rank's counts up to the checkpoint
            self.stats.restore(progress["decisions"], progress["rows"], progress.get("episodes"))
            self.trend, self.counted = progress["trend"], progress["counted"]
        self.bar = tqdm(total=total, initial=initial, unit="step", desc=desc, dynamic_ncols=True,
                        mininterval=0.5 if sys.stderr.isatty() else 30,  # a log file gets a line every 30 s
                        disable=run.rank > 0)

    def on_log(self, metrics: dict, step: int) -> None:
        log_metrics(self.run, metrics, step)
        if "charts/success_rate" in metrics:  # the episodes that finished in this update, and how many
            n = metrics["charts/success_episodes"]
            self.counted["episodes"] += n
            self.counted["successes"] += round(metrics["charts/success_rate"] * n)
            self.trend.append(round(metrics["charts/success_rate"], 3))
            self.last = f"{self.trend[-1]:.2f} (n={n})"
        if "charts/order_named" in metrics:  # under follow_order (ppo.py): the order's decisions, its weight
            c = self.counted
            c["order_named"] = c.get("order_named", 0) + metrics["charts/order_named"]
            c["order_followed"] = c.get("order_followed", 0) + metrics["charts/order_followed"]
            c.setdefault("teacher_coef_first", metrics["charts/teacher_coef"])
            c["teacher_coef_last"] = metrics["charts/teacher_coef"]
        shown = {"success": self.last} if self.score is None else {"score": self.score.update()}
        self.bar.set_postfix(SPS=metrics.get("charts/SPS"), llm=llm_calls(self.run), **shown)

    def checkpoint(self) -> dict:
        """The counts so far, summed over the ranks: every rank calls this (a collective), rank 0 saves it."""
        decisions, rows, episodes = self.stats.totals()
        return {"decisions": decisions, "rows": rows, "episodes": episodes, "trend": list(self.trend),
                "counted": dict(self.counted)}

    def order(self) -> dict | None:
        """Under a plan with follow_order: at how many of this iteration's decisions its order named a code action
        that could start, at how many of those the RL agent chose it, and the teacher's weight at the iteration's
        first and last update; None without an order (or before the first update)."""
        c = self.counted
        if not c.get("order_named"):
            return None
        return {"named": c["order_named"], "followed": c["order_followed"],
                "share": round(c["order_followed"] / c["order_named"], 4),
                "teacher_coef": [round(c["teacher_coef_first"], 3), round(c["teacher_coef_last"], 3)]}

    def train_success(self) -> tuple[float | None, int]:
        """(success rate, episodes) of the training episodes that finished in this iteration."""
        n = self.counted["episodes"]
        return (round(self.counted["successes"] / n, 3) if n else None), n


def record_skills(run: Run, action_set: ActionSet, stats: CodeStats, task: str, iteration: int) -> None:
    """The iteration's code-action statistics into the shared skill library (if the run uses one), after
    every iteration so a crash loses at most this one's numbers; one that cannot be written is a warning."""
    if run.skill_library is None:
        return
    try:
        run.skill_library.record_iteration(action_set.actions, stats.rows, task=task, run=str(run.dir.resolve()),
                                           iteration=iteration)
    except OSError as e:
        tqdm.write(f"[iter {iteration}] warning: the skill library could not be written ({e}); the run goes on")


def last_code_stats(run: Run, it: int) -> dict:
    """Each code action's row of the last stats.json, {} before any: a rewrite sees what its code did. `it` is
    the iteration now (0-based), so iter_<it>/ (the directories count from 1) is the one before it."""
    path = run.dir / f"iter_{it}" / "stats.json"
    return json.loads(path.read_text()).get("code_actions", {}) if path.is_file() else {}


def record_attempts(attempts: list, it_dir: Path, name: str, iteration: int) -> None:
    """The fast agent's attempts at one sub-action: each in <it_dir>/attempts/, one line per failed one."""
    save_attempts(attempts, it_dir / "attempts", name)
    for n, a in enumerate(attempts, 1):
        if a.error:
            tqdm.write(f"[iter {iteration}] {name} attempt {n} failed: {a.error.splitlines()[0][:160]}")


def record_iteration(run: Run, state: LoopState, critic_stats: dict, ev: dict, stats: CodeStats,
                     action_set: ActionSet, rl_config: dict, n_actions: int, t0: float) -> None:
    """Rank 0, after an iteration's evaluation (`ev`): eval.jsonl, the eval and code-action metrics, the eval
    GIF, stats.json (what the critic reads), the iteration's row of the run's history (summary.md and the
    ablation tables are made from it; wall_s counts from `t0`), and one line for the user."""
    iteration, step = critic_stats["iteration"], critic_stats["env_steps"]  # iteration: 1-based, as iter_1/
    write_rows(run.dir / "eval.jsonl", ev["rows"])
    log_metrics(run, {"eval/success_rate": ev["success_rate"], "eval/episodic_length": ev["mean_length"],
                      "eval/episodic_return": ev["mean_return"]}, step)
    for name, row in stats.summary().items():
        log_metrics(run, {f"code/{name}/share": row["share"], f"code/{name}/success_rate": row["success_rate"]},
                    step)
    it_dir = run.dir / f"iter_{iteration}"
    it_dir.mkdir(exist_ok=True)
    if run.args.capture_video and ev["frames"]:
        report.write_gif(it_dir / "eval.gif", ev["frames"])
    (it_dir / "stats.json").write_text(json.dumps(critic_stats, indent=2))
    train_success, n_train = critic_stats["success_rate"], critic_stats["success_episodes"]
    score, no_goal = critic_stats["score"], evidence.no_goal(run.args.task)  # no goal: the score stands for success (0)
    eval_score = evidence.score_row(evidence.crafter_score(ev["rows"])) if no_goal else None
    state.history.append({
        "iteration": iteration, "env_steps": step, "train_success": train_success, "train_episodes": n_train,
        "eval_success": ev["success_rate"], "eval_length": ev["mean_length"], "eval_env_steps": ev["env_steps"],
        "code_actions": list(action_set.active.values()), "rl_config": rl_config,
        "hand_written": action_set.hand_written(), "episode_lengths": critic_stats["episode_lengths"],
        "score": evidence.score_row(score), "eval_score": eval_score, "llm_calls": llm_calls(run),
        "reused": state.reused, "n_actions": n_actions, "curriculum": _curriculum_row(state.curriculum),
        "wall_s": round(time.time() - t0, 1)})
    train, evaluated = (f"score {report.score_text(score)}", f"score {report.score_text(eval_score)}") if no_goal \
        else (f"success {report.rate_text(train_success, n_train)}",
              f"success {report.rate_text(ev['success_rate'], critic_stats['eval_episodes'])}")
    tqdm.write(f"[iter {iteration}] env steps {step}: train {train}, eval {evaluated}")
    if order := critic_stats.get("order"):  # under follow_order: is it RL or the taught order that chooses?
        tqdm.write(f"[iter {iteration}] the plan's order named a code action at {order['named']} decisions; the RL "
                   f"agent chose it at {order['share']:.1%} of them (teacher weight {order['teacher_coef'][0]:.2f} "
                   f"-> {order['teacher_coef'][1]:.2f})")


def record_feedback(run: Run, state: LoopState, iteration: int, feedback) -> None:
    """The critic's decision: the feedback the next plan reads, iter_k/feedback.json and the log's lines."""
    state.feedback = feedback.to_dict()
    (run.dir / f"iter_{iteration}" / "feedback.json").write_text(json.dumps(feedback.to_dict(), indent=2))
    tqdm.write(f"[iter {iteration}] critic: {feedback.summary}")
    for reason in feedback.reasons:
        tqdm.write(f"[iter {iteration}] critic decided: {reason}")


def _curriculum_row(saved: dict | None) -> dict | None:
    """The curriculum as the history keeps it: the chain, the sub-task being trained, the stages done."""
    if not saved:
        return None
    current = saved["subtasks"][saved["stage"]] if saved["stage"] < len(saved["subtasks"]) else None
    return {"subtasks": saved["subtasks"], "current": current, "stages": saved["stages"]}


def episode_rows(run: Run, iteration: int) -> list[dict]:
    """The Crafter stats rows (stats.jsonl) of the training episodes that ended in this iteration."""
    path = run.dir / "stats.jsonl"
    return [r for r in report.read_jsonl(path) if r.get("iteration") == iteration] if path.is_file() else []


def log_rejections(it: int, what: str, slow) -> None:
    """One line per reply the slow agent rejected, in the user's words (the model got its own)."""
    for n, problem in enumerate(slow.last_rejections, 1):
        tqdm.write(f"[iter {it + 1}] {what} reply {n} rejected: {problem[:200]}")


def llm_failed(run_dir: Path, error: Exception) -> int:
    """The LLM could not be used (transport, or unusable replies after every repair): say so, exit 2."""
    print(f"error: the LLM could not be used: {error}", file=sys.stderr)
    if (run_dir / "llm_transcript.jsonl").is_file():
        print(f"every request and reply is in {run_dir / 'llm_transcript.jsonl'}", file=sys.stderr)
    return 2
