"""RL-GPT in one loop: the slow agent plans, the fast agent codes, PPO learns the rest, a critic reviews.

    python train.py --task collect_wood                    # hand-written reference skills, no LLM needed
    python train.py --task collect_wood --llm http         # any OpenAI-compatible endpoint: docs/llm.md
    python train.py --task collect_wood --mode rl          # the plain-PPO baseline
    python train.py --task collect_wood --mode rl+config   # plain PPO with the plan's action mask and shaping
    python train.py --task collect_wood --mode code        # one program for the whole task, no RL
    python train.py --resume runs/<run_dir>                # continue an interrupted run
    python train.py --help                                 # every setting, PPO's included
    torchrun --standalone --nproc_per_node 2 train.py ...  # one run over 2 processes: docs/distributed.md

One iteration (the paper's two loops):
  1. slow agent: task + primitive API doc (+ critic feedback) -> sub-actions, each "code" or "rl"
  2. fast agent: writes each code sub-action; sandbox check + dry run + repair (the fast loop)
  3. accepted code actions join PPO's action space (agent.extend; dropped ones are masked, never
     deleted, so action indices stay stable); PPO trains on this iteration's share of the budget
  4. evaluation episodes; the critic reads success, per-code-action statistics (and frames) and
     its feedback goes to the next plan (the slow loop)
Budgets, curves and tables count primitive env steps: a code action that ran 12 steps counts 12.

One set of training envs lives for the whole run (no iteration end or checkpoint resets it), so no episode
is cut and lost to the statistics; checkpoints sit at rollout boundaries and do not change what is learned.

Under torchrun every rank steps --num-envs / WORLD_SIZE envs and trains the same agent (distributed.py);
rank 0 alone talks to the LLM, broadcasts the plan and code actions, evaluates, logs and checkpoints.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass

import torch
from tqdm import tqdm

import cli
import curriculum
import distributed
import env
import evidence
import iteration_record
import report
import run_dir
from code_actions import ActionSet, evaluate, grow_actions, reuse_skill, run_program, whole_task_subaction
from core import Mode, Plan, api_doc
from critic import Feedback, rollback_if_worse
from fast_agent import FastAgent
from llm import LLMError
from policy import Agent, identity
from ppo import PPO, PPOConfig, seed_everything
from reference import minedojo_skills, skills, whole_task
from run_dir import save  # save by name: tests patch train.save to stop a run mid-iteration
from run_state import LoopState, Run
from show_prompt import show_prompts
from slow_agent import AgentError, SlowAgent


@dataclass
class Args:
    task: str = "collect_wood"
    """task to learn (--list-tasks prints them; minedojo:<task_id> needs MineDojo installed)"""
    mode: Mode = Mode.RLGPT
    """rlgpt: code actions + PPO | rl: plain PPO, no LLM | rl+config: plain PPO with the plan's action mask
    and reward shaping, no code actions | code: one program for the whole task, no RL"""
    llm: str = "auto"
    """http | local | reference | replay:<transcript.jsonl> | auto (http if an endpoint is set, else reference)"""
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
    """torch CPU threads. 1 is safe when other jobs share the cores (2 on 2 busy cores: 10-40x slower); on an idle
    2-core machine 2 trained plain PPO ~1.2x faster (bench/ppo_sps.py --threads 2), not repeating 1 thread bit by bit"""
    max_macro_steps: int = 64
    """most env steps one call of a code action may take"""
    eval_episodes: int = 8
    """evaluation episodes after each iteration (fresh worlds, sampled policy)"""
    checkpoint_every: int = 10_000
    """env steps between checkpoints (a crash loses about this much), at rollout boundaries: learning is unchanged"""
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
    show_prompt: bool = False
    """print the messages the planner, the fast agent and the critic first send with these settings, and exit"""
    hand_written: bool = False
    """let an LLM run use reference/skills.py's hand-written code: the critic may choose its variants, the planner reuse
    its skills from the skill library (labelled hand-written wherever code actions are listed)"""
    crafter_impl: str = "fast"
    """fast: fastcrafter.Env, the same game bit for bit, several times faster | original: crafter.Env"""

    def __post_init__(self):  # the command line (and a resumed config.json) give the mode as text
        if not isinstance(self.mode, Mode) and self.mode in {m.value for m in Mode}:
            self.mode = Mode(self.mode)  # anything else: cli.validate says what --mode may be


def parse_args(argv: list[str] | None = None) -> tuple[Args, PPOConfig, argparse.ArgumentParser]:
    """--help is generated from the two dataclasses' field docstrings (cli.py)."""
    parser = cli.make_parser(__doc__, Args, PPOConfig)
    return (*cli.parse(parser, argv, Args, PPOConfig), parser)


def agents_phase(args: Args, run: Run, slow: SlowAgent, fast: FastAgent, action_set: ActionSet, state: LoopState,
                 doc: str) -> None:
    """Steps 1-2 of an iteration: (re)plan, then write every code sub-action not yet accepted."""
    it, it_dir = state.iteration, run.dir / f"iter_{state.iteration + 1}"  # as the log: [iter 1]
    (it_dir / "skills").mkdir(parents=True, exist_ok=True)
    feedback = Feedback.from_dict(state.feedback) if state.feedback else None
    before = {"plan": state.plan, "active": dict(action_set.active)}  # a change the critic made is measured
    previous = Plan.from_dict(state.plan) if state.plan else None
    if args.mode == Mode.CODE:
        plan = Plan(args.task, [], [whole_task_subaction(args.task, args.max_macro_steps)])  # no shaping, no mask
    else:
        if run.skill_library is not None:  # read again every iteration: other runs may have added skills
            slow.catalogue = run.skill_library.catalogue(args.task, hand_written=slow.hand_written)
        try:
            if state.rolled_back:  # the critic's change was rolled back: train that plan again
                state.rolled_back, plan = False, previous
            else:
                run.waiting(f"[iter {it + 1}] asking the slow agent for a plan ...")
                plan = slow.plan(run.task, doc, feedback=feedback, previous=previous)
        except (LLMError, AgentError) as e:
            if previous is None:
                raise
            tqdm.write(f"[iter {it + 1}] planning failed ({e}); carrying on with the last good plan")
            plan = previous
        finally:
            iteration_record.log_rejections(it, "plan", slow)
    subs = [] if args.mode == Mode.RL_CONFIG else plan.code_subactions  # rl+config: the plan's RL config only
    state.plan = plan.to_dict()
    (it_dir / "plan.json").write_text(json.dumps(state.plan, indent=2))
    was = {s.name: s.initiation for s in previous.subactions} if previous else {}  # the last plan's initiations
    for sub in subs:
        fix = feedback.fixes.get(sub.name) if feedback else None
        variant = feedback.variants.get(sub.name) if feedback else None
        if sub.name in action_set.active and not fix and not variant:  # accepted, and the critic is happy with it
            if (sub.initiation or {}) != (was.get(sub.name) or {}):  # the plan gave it a new initiation: a new version
                action_set.add(sub.name, action_set.current(sub.name), sub.initiation)
            continue  # else it stays as it is (a variant keeps its own initiation)
        if args.mode == Mode.CODE and run.llm is None:  # (every branch sets `action`)
            programs = whole_task if env.is_crafter(args.task) else minedojo_skills
            action = programs.whole_task_program(args.task, args.max_macro_steps)
        elif variant:  # the critic chose another hand-written version of this skill (an LLM run: --hand-written)
            action = skills.variants(sub.name)[variant]
            tqdm.write(f"[iter {it + 1}] {sub.name!r}: reference/skills.py's hand-written variant {variant!r}, "
                       "not LLM output")
        elif sub.reuse and not fix and (action := reuse_skill(run.skill_library, sub.name, fast.check_and_dry_run,
                                                              it + 1, slow.hand_written)):
            state.reused = state.reused + [sub.name]
        else:
            run.waiting(f"[iter {it + 1}] asking the fast agent to write {sub.name!r} ...")
            examples = run.skill_library.related(f"{args.task} {sub.name} {sub.spec}") if run.skill_library else None
            current = action_set.current(sub.name)
            action = fast.write(sub, doc, feedback=fix, examples=examples, current=current,
                                stats=iteration_record.last_code_stats(run, it).get(current.name) if current else None)
            iteration_record.record_attempts(fast.last_attempts, it_dir, sub.name, it + 1)
        if action is None:
            saved = f" (attempts in {it_dir / 'attempts'})" if (it_dir / "attempts").is_dir() else ""
            tqdm.write(f"[iter {it + 1}] no working code for {sub.name!r}: it is left to RL{saved}")
            action_set.active.pop(sub.name, None)
            continue
        action = action_set.add(sub.name, action, action.initiation if variant else sub.initiation)  # the variant's own
        (it_dir / "skills" / f"{action.name}.py").write_text(action.source)
    action_set.keep_only({s.name for s in subs})  # the plan moved the others to RL: masked from now on
    if feedback is not None and (state.plan, action_set.active) != (before["plan"], before["active"]):
        state.before_change = before  # kept only if the next iteration is not worse (critic.rollback_if_worse)
    tqdm.write(f"[iter {it + 1}] plan: {len(plan.subactions)} sub-action{'' if len(plan.subactions) == 1 else 's'}; "
               f"code actions in use: {action_set.in_use_text()}")


def train_iteration(args: Args, run: Run, ppo: PPO, action_set: ActionSet, state: LoopState) -> None:
    """Steps 3-4 of an iteration: RL on this iteration's share of the budget, evaluation, the critic."""
    it, t0 = state.iteration, time.time()
    n_base = ppo.agent.n_actions - len(action_set.actions)
    plan = Plan.from_dict(state.plan) if state.plan else None
    cu = curriculum.for_plan(state.curriculum, plan, args.total_steps - ppo.global_step, ppo.global_step) \
        if args.mode.uses_plan_config and env.is_crafter(args.task) else None  # the planner's chain
    state.curriculum = cu.to_dict() if cu else None
    envs, base_actions = run.envs, run.task.actions

    def configure():  # the plan's shaping, the current sub-task, its rl config; -> the action mask
        rl_config = curriculum.plan_rl_config(args.mode, state)
        envs.call("set_shaping", rl_config.get("shaping"))  # in every backend; the order PPO is taught (ppo.py):
        envs.call("set_follow_order", (rl_config.get("follow_order") and action_set.plan_order(plan)) or None)
        if env.is_crafter(args.task):  # the sub-task's bonus; the iteration the stats rows name, 1-based as iter_1/
            envs.call("set_subtask", cu.current if cu else None)
            envs.set_attr("iteration", it + 1)
        return action_set.mask(base_actions, rl_config.get("mask_actions", []))

    mask = configure()
    program = n_base + action_set.actions.index(action_set.current("solve_task")) \
        if args.mode == Mode.CODE and "solve_task" in action_set.active else None
    start, target = args.total_steps * it // args.iterations, args.total_steps * (it + 1) // args.iterations
    progress, state.progress = state.progress, None
    tally = iteration_record.IterationTally(run, action_set, progress, total=target - start,
                                            initial=min(target, ppo.global_step) - start)
    stats = tally.stats

    def on_step(actions, infos) -> None:
        stats(actions, infos)
        if cu is not None:
            cu.seen(infos)

    def on_update(step: int):  # at a rollout boundary: the curriculum may move on (-> its new mask)
        if moved := (cu.update(step) if cu is not None else None):
            tqdm.write(f"[iter {it + 1}] {moved}")
        state.curriculum = cu.to_dict() if cu is not None else None
        # checkpoint once past each multiple (not at the iteration's last update: main() saves after it)
        if step < target and step // args.checkpoint_every > run.checkpoint_mark:
            run.checkpoint_mark = step // args.checkpoint_every
            state.progress = tally.checkpoint()
            save(run, ppo, action_set, state)
            state.progress = None
        return configure() if moved else None  # the next sub-task's mask, shaping and bonus

    with tally.bar:  # closed however this ends: an interrupt's message is then the last line shown
        if ppo.global_step >= target or (args.mode == Mode.CODE and program is None):
            pass  # done already, or no program was accepted: nothing runs, no step counts
        elif args.mode == Mode.CODE:
            run_program(run, ppo, program, target - ppo.global_step, stats, tally.bar.update, tally.on_log, on_update)
        else:
            ppo.train(envs, target - ppo.global_step, action_mask=mask, on_log=tally.on_log, on_step=on_step,
                      progress=tally.bar.update, on_update=on_update)
    stats.gather()
    if run.rank:  # evaluation, the critic and the run directory are rank 0's
        return
    iteration_record.record_skills(run, action_set, stats, args.task, it + 1)
    mask = configure() if cu is not None else mask  # the mask of the last sub-task trained
    ev = evaluate(ppo.agent, args, action_set, mask, it, ppo.cfg.gamma, program, envs.get_attr("follow_order")[0])
    critic_stats = evidence.critic_stats(args, ppo.cfg.num_steps, it + 1, (start, ppo.global_step), tally, ev,
                                         iteration_record.episode_rows(run, it + 1))
    iteration_record.record_iteration(run, state, critic_stats, ev, stats, action_set,
                                      curriculum.plan_rl_config(args.mode, state), ppo.agent.n_actions, t0)
    if why := rollback_if_worse(state, action_set):  # the critic's last change, measured
        tqdm.write(f"[iter {it + 1}] the critic's change: {why}")
    if args.mode == Mode.RL or it + 1 == args.iterations or state.rolled_back:
        return  # (after a rollback the critic's view of the dropped plan is moot: that plan trains again)
    frames = report.png_frames(ev["failed_frames"]) if args.vision else None
    active = [a for a in action_set.actions if a.name in action_set.active.values()]
    try:
        run.waiting(f"[iter {it + 1}] asking the critic ...")
        feedback = run.slow.critique(plan, active, critic_stats, frames)
    except (LLMError, AgentError) as e:
        tqdm.write(f"[iter {it + 1}] the critic failed ({e}); the next plan goes without feedback")
        return
    finally:
        iteration_record.log_rejections(it, "critic", run.slow)
    iteration_record.record_feedback(run, state, it + 1, feedback)


def main(argv: list[str] | None = None) -> int:
    args, cfg, parser = parse_args(argv)
    if args.list_tasks:
        return env.main(["--list"])
    if args.show_prompt:  # what an LLM run with these settings sends first; nothing is sent
        print(show_prompts({**asdict(args), "num_steps": cfg.num_steps}))
        return 0
    if args.resume:
        args, cfg = cli.resumed_args(args, cfg, argv, parser)
    cli.validate(args, cfg, parser)
    rank, world, device = distributed.init_distributed(args.device)
    seed_everything(args.seed)  # every rank builds the same initial weights
    torch.set_num_threads(args.threads)
    probe = env.make_env(args.task, crafter_impl=args.crafter_impl)
    n_base, agent = probe.action_space.n, Agent(probe.observation_space, probe.action_space.n)  # code actions: after
    probe.close()
    run = run_dir.open_run(args, cfg, parser, rank, world, device, identity(agent))  # a resume needs the same network
    if run is None:  # the LLM backend cannot be used (said why); nothing ran
        return 2
    run.task, api = env.get_task(args.task), env.api_for(args.task)
    base_actions, doc = run.task.actions, api_doc(api, args.max_macro_steps)  # the doc: how many steps one call takes
    if rank == 0 and args.mode == Mode.RLGPT:
        run.skill_library = run_dir.open_skill_library(args, api.__name__, doc)
    ppo = PPO(agent, cfg, device=device, total_steps=args.total_steps)
    action_set, state, episode_numbers = ActionSet(), LoopState(), []  # or the checkpoint's:
    if args.resume and (run.dir / "checkpoint.pt").is_file():
        action_set, state, episode_numbers = run_dir.resume(run, ppo)
    run.envs, run.envs_started = run_dir.make_train_envs(args, run, cfg, action_set, episode_numbers), False
    run.checkpoint_mark = ppo.global_step // args.checkpoint_every
    if rank:  # each rank samples its own actions (a checkpoint holds rank 0's RNG state)
        seed_everything(args.seed + 1000 * rank + ppo.global_step)
    run.slow = slow = SlowAgent(run.llm, hand_written=args.hand_written or run.llm is None)
    fast = FastAgent(run.llm, dry_run_task=args.task, dry_run_steps=args.max_macro_steps,
                     dry_run_options={"crafter_impl": args.crafter_impl} if env.is_crafter(args.task) else {})
    try:
        while state.iteration < args.iterations:
            run.iteration = state.iteration
            if state.phase == "plan":
                if args.mode.plans and rank == 0:
                    agents_phase(args, run, slow, fast, action_set, state, doc)
                if world > 1:  # every rank gets rank 0's plan and code actions, in the same order
                    state, actions, active = distributed.broadcast(
                        [state, [asdict(a) for a in action_set.actions], action_set.active])
                    action_set = ActionSet([env.CodeAction(**a) for a in actions], active)
                in_force = curriculum.plan_rl_config(args.mode, state)
                old_mask = action_set.mask(base_actions, in_force.get("mask_actions", []))
                grow_actions(ppo, run.envs, action_set, n_base, old_mask)
                state.phase = "train"
                save(run, ppo, action_set, state)
            train_iteration(args, run, ppo, action_set, state)
            state.iteration += 1
            state.phase = "plan"
            save(run, ppo, action_set, state)
        run_dir.write_unfinished(run)  # the episodes still going when the budget ran out
    except KeyboardInterrupt:
        print(f"\ninterrupted: resume with  python train.py --resume {run.dir}", file=sys.stderr)
        return 130
    except (LLMError, AgentError) as e:
        return run_dir.llm_failed(run.dir, e)
    finally:
        run_dir.close(run)
    if world > 1:
        run_dir.check_ranks_agree(run.dir, ppo, action_set, rank)
        distributed.leave()
        if rank:
            return 0
    report.write_summary(run.dir, state.history, args)
    print(f"done: {ppo.global_step} env steps; summary in {run.dir / 'summary.md'}")
    return 0


if __name__ == "__main__":
    distributed.end_process(main())
