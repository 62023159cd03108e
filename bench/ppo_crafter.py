"""Plain PPO (no code actions) on a Crafter task: does the RL half learn on its own?

    python -m bench.ppo_crafter                               # collect_wood, 100k env steps, CPU
    python -m bench.ppo_crafter --steps 20000 --device cuda
    python -m bench.ppo_crafter --csv bench/out/ppo_crafter.csv

Prints the success curve: after each update, the success rate and mean length of the episodes that
finished during the last `--window` env steps, plus the running totals.
"""

import argparse
import csv
import os
import time

import numpy as np
import torch

import env as rl_env
from policy import Agent
from ppo import PPO, PPOConfig, seed_everything


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="collect_wood")
    p.add_argument("--steps", type=int, default=100_000, help="primitive env steps")
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--window", type=int, default=10_000, help="env steps per point of the curve")
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: see train.py --threads)")
    p.add_argument("--precision", default="auto", help="the update's precision: auto | fp32 | bf16 (PPOConfig)")
    p.add_argument("--csv", help="also write the curve to this CSV file")
    args = p.parse_args()

    seed_everything(args.seed)
    torch.set_num_threads(args.threads)
    envs = rl_env.make_vec_env(args.task, args.num_envs, seed=args.seed)
    agent = Agent(envs.single_observation_space, envs.single_action_space.n)
    ppo = PPO(agent, PPOConfig(precision=args.precision), device=args.device, total_steps=args.steps)
    episodes: list[tuple[int, float, int]] = []  # (global_step at the end, success, length)

    def on_step(actions: np.ndarray, infos: dict) -> None:
        final = infos.get("final_info", {})
        if "episode" in final:
            ep = final["episode"]
            for i in np.flatnonzero(final["_episode"]):
                episodes.append((ppo.global_step, float(ep["success"][i]), int(ep["l"][i])))

    rows, next_point, t0 = [], args.window, time.time()
    print(f"task {args.task}, {args.steps} env steps, {args.num_envs} envs, device {ppo.device}, "
          f"{torch.get_num_threads()} torch threads, bf16 update: {ppo.bf16}")
    print(f"{'env steps':>10} {'episodes':>9} {'success':>8} {'mean len':>9} {'all-time':>9} {'SPS':>6}")

    def on_log(metrics: dict, step: int) -> None:
        nonlocal next_point
        if step < next_point and step < args.steps:
            return
        next_point = (step // args.window + 1) * args.window
        recent = [(s, ln) for g, s, ln in episodes if g > step - args.window]
        succ = np.mean([s for s, _ in recent]) if recent else float("nan")
        length = np.mean([ln for _, ln in recent]) if recent else float("nan")
        total = np.mean([s for _, s, _ in episodes]) if episodes else float("nan")
        sps = step / (time.time() - t0)
        rows.append((step, len(recent), succ, length, total))
        print(f"{step:>10} {len(recent):>9} {succ:>8.2f} {length:>9.1f} {total:>9.2f} {sps:>6.0f}", flush=True)

    stats = ppo.train(envs, args.steps, on_log=on_log, on_step=on_step)
    print(f"done: {stats['episodes']} episodes, success rate {stats['success_rate']:.2f}, "
          f"mean length {stats['mean_length']:.0f}, {stats['sps']:.0f} SPS")
    if args.csv:
        os.makedirs(os.path.dirname(os.path.abspath(args.csv)), exist_ok=True)
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["env_steps", "episodes", "success_rate", "mean_length", "success_rate_all"])
            w.writerows(rows)


if __name__ == "__main__":
    main()
