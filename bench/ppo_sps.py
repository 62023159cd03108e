"""Throughput of our PPO next to raw env stepping and Stable-Baselines3 PPO, measured in one run.

    python bench/ppo_sps.py                                  # collect_wood, 8 envs, 128x8 rollouts, 16k steps
    python bench/ppo_sps.py --steps 2048 --num-envs 4        # a quick look
    python bench/ppo_sps.py --device cuda --skip-sb3

Same Crafter vector env, same rollout (num_steps x num_envs) and update sizes (minibatches, epochs) for
(a) random actions, (b) ppo.PPO and (c) SB3 PPO with MultiInputPolicy (NatureCNN on the image, the
CnnPolicy-equivalent for a Dict observation). Each trainer's env time is measured inside its own run,
so "learner overhead" = (its wall time - its env stepping time) / env steps.
Targets (issue 3): b/a >= 0.8, b/c >= 1.2, our overhead <= half of SB3's.
SB3 is a bench-only dependency: pip install -r bench/requirements.txt
"""

import argparse
import os
import sys
import time

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import env as rl_env  # noqa: E402
from ppo import PPO, Agent, PPOConfig, seed_everything  # noqa: E402


class TimedVecEnv(gym.vector.VectorWrapper):
    """Adds up the wall time spent inside env.step, so the trainer's own cost can be separated."""

    def __init__(self, env: gym.vector.VectorEnv):
        super().__init__(env)
        self.step_time = 0.0

    def step(self, actions):
        t = time.perf_counter()
        out = self.env.step(actions)
        self.step_time += time.perf_counter() - t
        return out


def bench_random(args) -> tuple[float, float]:
    envs = rl_env.make_vec_env(args.task, args.num_envs, seed=args.seed)
    envs.reset(seed=args.seed)
    rng = np.random.default_rng(args.seed)
    n_act = envs.single_action_space.n
    t = time.perf_counter()
    for _ in range(args.steps // args.num_envs):
        envs.step(rng.integers(0, n_act, args.num_envs))
    wall = time.perf_counter() - t
    envs.close()
    return args.steps / wall, wall


def bench_ours(args) -> tuple[float, float]:
    seed_everything(args.seed)
    envs = TimedVecEnv(rl_env.make_vec_env(args.task, args.num_envs, seed=args.seed))
    agent = Agent(envs.single_observation_space, envs.single_action_space.n)
    cfg = PPOConfig(num_steps=args.num_steps, num_minibatches=args.minibatches, update_epochs=args.epochs,
                    seed=args.seed)
    ppo = PPO(agent, cfg, device=args.device, total_steps=args.steps)
    t = time.perf_counter()
    ppo.train(envs, args.steps)
    wall = time.perf_counter() - t
    envs.close()
    return ppo.global_step / wall, (wall - envs.step_time) / ppo.global_step


def bench_sb3(args) -> tuple[float, float]:
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    class TimedDummyVecEnv(DummyVecEnv):
        step_time = 0.0

        def step_wait(self):
            t = time.perf_counter()
            out = super().step_wait()
            self.step_time += time.perf_counter() - t
            return out

    venv = TimedDummyVecEnv([lambda i=i: rl_env.make_env(args.task, args.seed + i) for i in range(args.num_envs)])
    batch = args.num_steps * args.num_envs
    model = SB3PPO("MultiInputPolicy", venv, n_steps=args.num_steps, batch_size=batch // args.minibatches,
                   n_epochs=args.epochs, learning_rate=2.5e-4, ent_coef=0.01, clip_range=0.2,
                   device=args.device, seed=args.seed, verbose=0)
    # SB3 wraps channels-last images in VecTransposeImage; time the innermost env, as for ours
    t = time.perf_counter()
    model.learn(total_timesteps=args.steps)
    wall = time.perf_counter() - t
    steps = model.num_timesteps
    return steps / wall, (wall - venv.step_time) / steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="collect_wood")
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--num-steps", type=int, default=128, help="rollout length per env")
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--steps", type=int, default=16384, help="env steps per measurement")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default; 1 as train.py)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skip-sb3", action="store_true")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"task {args.task}, {args.num_envs} envs x {args.num_steps} steps, {args.minibatches} minibatches x "
          f"{args.epochs} epochs, {args.steps} env steps each, device {args.device}, "
          f"{torch.get_num_threads()} torch threads")
    sps_a, _ = bench_random(args)
    print(f"(a) env, random actions : {sps_a:8.0f} SPS")
    sps_b, over_b = bench_ours(args)
    print(f"(b) ours (ppo.py)       : {sps_b:8.0f} SPS   learner overhead {over_b * 1e6:7.0f} us/env step")
    print(f"    b/a = {sps_b / sps_a:.2f}  (target >= 0.8)")
    if args.skip_sb3:
        return
    sps_c, over_c = bench_sb3(args)
    print(f"(c) Stable-Baselines3   : {sps_c:8.0f} SPS   learner overhead {over_c * 1e6:7.0f} us/env step")
    print(f"    b/c = {sps_b / sps_c:.2f}  (target >= 1.2)")
    print(f"    overhead ours/SB3 = {over_b / over_c:.2f}  (target <= 0.5)")


if __name__ == "__main__":
    main()
