"""Code actions' training throughput next to plain PPO's, side by side in one run:

    python -m bench.code_sps                  # collect_stone and crafter, 12 rounds x 1024 env steps a mode
    python -m bench.code_sps --tasks collect_wood --steps 2048 --rounds 2   # a quick look

The default run takes about a minute on the idle 2-core machine (12288 timed env steps per mode and task, in
rounds of one rollout each: short rounds interleave the modes closely, so a slower spell of the machine falls
on all of them alike).

Per task, on the same world seeds and rollout sizes (8 envs x 128 decisions, 4 minibatches x 4 epochs, 1 torch
thread, fastcrafter), three modes as train.py runs them:
  rl     ppo.PPO over the task's base actions (train.py --mode rl);
  rlgpt  the same PPO with the code actions of the hand-written reference plan appended (plans.reference_plan,
         what `--llm reference` gives train.py), each new action at PPO's new-action prior, the plan's action mask
         applied: a fresh policy, so code actions run about as often as at the start of training;
  code   the whole-task program (whole_task.whole_task_program) called at every decision of every env, no learner
         (train.py --mode code).
Every code action runs in its env's sandbox worker process, the envs' at the same time, as in training
(env.CodeActionVectorEnv). Each mode is built once and warmed
up off the clock (one rollout: numba compilation, worker start-up); then the modes take turns, `--rounds` rounds
of `--steps / --rounds` env steps each, task after task, so load from other jobs falls on all alike. SPS = env
steps (every primitive step of every code action) per wall-clock second, summed over the rounds. The last line
takes the worse task of the two for each ratio (targets: rlgpt/rl >= 0.9, code/rl >= 0.8).
"""

import argparse
import dataclasses
import time

import numpy as np
import torch

import env
import ppo
from policy import Agent
from reference import plans, skills, whole_task

MODES = ("rl", "rlgpt", "code")


class Mode:
    """One mode on one task: `run(n)` takes at least n more env steps; wall time and steps add up."""

    def __init__(self, mode: str, args, task: str):
        self.mode, self.args, self.task = mode, args, task
        self.steps, self.wall, self.code_steps, self.timed_code_steps = 0, 0.0, 0, 0
        ppo.seed_everything(args.seed)
        actions = []
        if mode == "rlgpt":
            plan = plans.reference_plan(task)
            actions = [dataclasses.replace(skills.skill_for(s["name"]), initiation=s.get("initiation", {}))
                       for s in plan["subactions"] if s["how"] == "code"]  # as train.py's ActionSet.add gives them
            masked = plan["rl_config"]["mask_actions"]
        elif mode == "code":
            actions = [whole_task.whole_task_program(task)]
        self.envs = env.make_vec_env(task, args.num_envs, seed=args.seed, code_actions=actions)
        self.n_base = self.envs.single_action_space.n - len(actions)
        if mode == "code":
            self.envs.reset(seed=None)
            return
        space = self.envs.single_observation_space
        agent = Agent(space, self.n_base)
        cfg = ppo.PPOConfig(num_steps=args.num_steps, num_minibatches=args.minibatches, update_epochs=args.epochs)
        self.mask = None
        if actions:
            base = np.array([name not in masked for name in env.get_task(task).actions], dtype=bool)
            agent.extend(len(actions), prior=cfg.new_action_prior, mask=base)
            self.mask = np.concatenate([base, np.ones(len(actions), dtype=bool)])
        self.ppo = ppo.PPO(agent, cfg, device="cpu")

    def _count(self, actions: np.ndarray, infos: dict) -> None:
        prim = ppo.step_info(infos, "prim_steps", 1, len(actions))
        self.code_steps += int(prim[actions >= self.n_base].sum())

    def run(self, n: int) -> int:
        """n or more env steps; the number taken."""
        if self.mode != "code":
            before = self.ppo.global_step
            self.ppo.train(self.envs, n, action_mask=self.mask, on_step=self._count)
            return self.ppo.global_step - before
        taken, actions = 0, np.full(self.envs.num_envs, self.n_base)
        while taken < n:  # as code_actions.run_program steps the envs
            infos = self.envs.step(actions)[4]
            self._count(actions, infos)
            taken += int(ppo.step_info(infos, "prim_steps", 1, len(actions)).sum())
        return taken

    def timed(self, n: int) -> None:
        start, code_before = time.perf_counter(), self.code_steps
        self.steps += self.run(n)
        self.wall += time.perf_counter() - start
        self.timed_code_steps += self.code_steps - code_before

    def sps(self) -> float:
        return self.steps / self.wall

    def close(self) -> None:
        self.envs.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=["collect_stone", "crafter"])
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--num-steps", type=int, default=128, help="rollout length per env (decisions)")
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--steps", type=int, default=12288, help="timed env steps per mode and task (all rounds)")
    p.add_argument("--rounds", type=int, default=12, help="the modes take turns this many times")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    chunk, warmup = args.steps // args.rounds, args.num_envs * args.num_steps
    print(f"tasks {', '.join(args.tasks)}; {args.num_envs} envs x {args.num_steps} decisions, {args.minibatches} "
          f"minibatches x {args.epochs} epochs, 1 torch thread; {args.steps} timed env steps per mode and task in "
          f"{args.rounds} rounds after {warmup} warm-up steps; load average {open('/proc/loadavg').read().split()[0]}",
          flush=True)
    modes = {(task, m): Mode(m, args, task) for task in args.tasks for m in MODES}
    for mode in modes.values():
        mode.run(warmup)
    for r in range(args.rounds):
        for (task, m), mode in modes.items():
            mode.timed(chunk)
            print(f"  round {r + 1}/{args.rounds} {task:14s} {m:6s} {mode.sps():6.0f} SPS so far", flush=True)
    worst = {"rlgpt": float("inf"), "code": float("inf")}
    for task in args.tasks:
        rl = modes[task, "rl"].sps()
        cells = []
        for m in MODES:
            mode = modes[task, m]
            share = f", {mode.timed_code_steps / mode.steps:.0%} of steps in code actions" if m != "rl" else ""
            cells.append(f"{m} {mode.sps():.0f} SPS ({mode.sps() / rl:.2f}x{share})")
            if m != "rl":
                worst[m] = min(worst[m], mode.sps() / rl)
        print(f"{task}: " + "; ".join(cells))
    for mode in modes.values():
        mode.close()
    print(f"load average now {open('/proc/loadavg').read().split()[0]}")
    print(f"code actions: rlgpt/rl SPS {worst['rlgpt']:.2f}x, code/rl SPS {worst['code']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
