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
import json
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from tqdm import tqdm

import cli
import env as E
import minedojo_skills
import ppo as P
import report
import skill_library as SL
import skills
from code_actions import CodeStats, Library, evaluate, is_crafter, run_program, whole_task_subaction
from core import Plan, SubAction, api_doc
from fast_agent import FastAgent, save_attempts
from llm import LLMError
from run_dir import (
    check_ranks_agree,
    init_distributed,
    llm_calls,
    log_metrics,
    make_llm,
    rewind_logs,
    running_episodes,
    save,
    write_rows,
)
from slow_agent import AgentError, Feedback, SlowAgent


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


def parse_args(argv: list[str] | None = None) -> tuple[Args, P.PPOConfig, argparse.ArgumentParser]:
    """--help is generated from the two dataclasses' field docstrings (cli.py)."""
    parser = cli.make_parser(__doc__, Args, P.PPOConfig)
    args, cfg = cli.parse(parser, argv, Args, P.PPOConfig)
    return args, cfg, parser


# ----------------------------------------------------------------------------------------------
# The run's one set of training envs: built once, grown in place, never reset by the trainer.


def make_train_envs(args: Args, run: dict, cfg: P.PPOConfig, library: Library):
    """This rank's share of --num-envs. Crafter tasks append every finished episode to stats.jsonl."""
    options = {} if not is_crafter(args) else {"stats_path": run["dir"] / "stats.jsonl",
                                                             "crafter_impl": args.crafter_impl}
    return E.make_vec_env(args.task, args.num_envs // run["world"], code_actions=library.actions, seed=args.seed,
                          rank=run["rank"], max_macro_steps=args.max_macro_steps, gamma=cfg.gamma, **options)


# ----------------------------------------------------------------------------------------------
# The run.


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
            programs = skills if is_crafter(args) else minedojo_skills
            action = programs.whole_task_program(args.task, args.max_macro_steps)
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
    mask = library.mask(E.get_task(args.task).actions, rl_config.get("mask_actions", []))
    envs = run["envs"]
    envs.call("set_shaping", rl_config.get("shaping"))  # the plan's shaping, in every backend
    if is_crafter(args):  # the iteration the stats rows name (the one they end in)
        envs.set_attr("iteration", k + 1)  # 1-based, as iter_1/ and the log
    program = n_base + library.actions.index(
        next(a for a in library.actions if a.name == library.active["solve_task"])) \
        if args.mode == "code" and "solve_task" in library.active else None
    start, target = args.total_steps * k // args.iterations, args.total_steps * (k + 1) // args.iterations
    bar = tqdm(total=target - start, initial=min(target, ppo.global_step) - start, unit="step",
               desc=f"iter {k + 1}/{args.iterations}", dynamic_ncols=True,
               mininterval=0.5 if sys.stderr.isatty() else 30,  # a log file gets a line every 30 s
               disable=run["rank"] > 0)
    # what this iteration has counted: training episodes (finished, succeeded), the success trend, the code
    # actions' statistics; a checkpoint inside the iteration keeps it, so a resume goes on counting from there
    stats, trend, last, counted = CodeStats(library), [], [None], {"episodes": 0, "successes": 0}
    progress = state.pop("progress", None)
    if progress is not None and run["rank"] == 0:  # rank 0 holds every rank's counts up to the checkpoint
        stats.decisions, stats.rows = progress["decisions"], progress["rows"]
        trend[:], counted = progress["trend"], progress["counted"]

    def on_log(metrics: dict, step: int) -> None:
        log_metrics(run, metrics, step)
        if "charts/success_rate" in metrics:  # the episodes that finished in this update, and how many
            n = metrics["charts/success_episodes"]
            counted["episodes"] += n
            counted["successes"] += round(metrics["charts/success_rate"] * n)
            trend.append(round(metrics["charts/success_rate"], 3))
            last[0] = f"{trend[-1]:.2f} (n={n})"
        bar.set_postfix(SPS=metrics.get("charts/SPS"), success=last[0], llm=llm_calls(run))

    def on_update(step: int) -> None:  # at a rollout boundary: checkpoint once past each multiple
        # not at the iteration's last update: main() saves after evaluation and the critic
        if step < target and step // args.checkpoint_every > run["checkpoint_mark"]:
            run["checkpoint_mark"] = step // args.checkpoint_every
            decisions, rows = stats.totals()  # every rank calls this (a collective), rank 0 saves it
            state["progress"] = {"decisions": decisions, "rows": rows, "trend": list(trend), "counted": dict(counted)}
            save(run, ppo, library, state)
            del state["progress"]

    if ppo.global_step >= target or (args.mode == "code" and program is None):
        pass  # done already, or no program was accepted: nothing runs, no step counts
    elif args.mode == "code":
        run_program(run, ppo, program, target - ppo.global_step, stats, bar.update, on_log, on_update)
    else:
        ppo.train(envs, target - ppo.global_step, action_mask=mask, on_log=on_log, on_step=stats,
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
    n_train = counted["episodes"]  # training success: the episodes that finished in this iteration
    train_success = round(counted["successes"] / n_train, 3) if n_train else None
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
    old_mask = library.mask(E.get_task(args.task).actions,
                            plan_rl_config(args, state).get("mask_actions", []))[:agent.n_actions]
    agent.extend(grow, prior=ppo.cfg.new_action_prior, obs=ppo.next_obs, mask=old_mask, copy_from=copy_from)
    E.set_vec_code_actions(run["envs"], library.actions)


def main(argv: list[str] | None = None) -> int:
    args, cfg, parser = parse_args(argv)
    if args.list_tasks:
        return E.main(["--list"])
    if args.resume:
        args, cfg = cli.resumed_args(args, cfg, argv, parser)
    cli.validate(args, cfg, parser)
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
    doc = api_doc(api)
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
