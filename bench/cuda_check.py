"""Same seed, same code, CPU vs CUDA: do the PPO losses match to float tolerance?

    python -m bench.cuda_check                       # 4096 env steps of collect_wood on cpu and on cuda
    python -m bench.cuda_check --against cpu         # run the comparison logic CPU vs CPU (no GPU needed)

ppo.py draws every random number (action sampling, minibatch shuffles) from the CPU generator and
TF32 is switched off here, so both runs take the same actions while their floats agree; the logged
losses of every update are then compared with --rtol/--atol. Exit code: 0 match, 1 mismatch,
2 no CUDA device, 3 the env itself is not reproducible (nothing was compared).
"""

import argparse

import numpy as np
import torch

import env as rl_env
from policy import Agent
from ppo import PPO, PPOConfig, seed_everything

KEYS = ["losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/approx_kl",
        "losses/clipfrac", "losses/explained_variance"]


def env_is_reproducible(args, vector_steps: int = 64) -> bool:
    """Two envs of the same seed fed the same actions must give the same observations, or any
    CPU/CUDA difference would be drowned by the env's own (e.g. Crafter's set iteration order)."""
    runs = []
    for _ in range(2):
        envs = rl_env.make_vec_env(args.task, args.num_envs, seed=args.seed)
        obs, _ = envs.reset(seed=args.seed)
        rng, frames = np.random.default_rng(args.seed), [obs["image"].copy()]
        for _ in range(vector_steps):
            frames.append(envs.step(rng.integers(0, envs.single_action_space.n, args.num_envs))[0]["image"].copy())
        envs.close()
        runs.append(np.stack(frames))
    return np.array_equal(*runs)


def run(device: str, args) -> tuple[list[dict], np.ndarray]:
    seed_everything(args.seed)
    envs = rl_env.make_vec_env(args.task, args.num_envs, seed=args.seed)
    agent = Agent(envs.single_observation_space, envs.single_action_space.n)
    cfg = PPOConfig(num_steps=args.num_steps, precision="fp32")  # bf16 on one side only would differ
    ppo = PPO(agent, cfg, device=device, total_steps=args.steps)
    assert ppo.device.type == torch.device(device).type, f"asked for {device}, got {ppo.device}"
    logs, actions = [], []
    ppo.train(envs, args.steps, on_log=lambda m, s: logs.append(m), on_step=lambda a, i: actions.append(a.copy()))
    envs.close()
    return logs, np.stack(actions)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="collect_wood")
    p.add_argument("--steps", type=int, default=4096)
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--num-steps", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--against", default="cuda", help="device to compare with the CPU run")
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-5)
    args = p.parse_args()
    if args.against.startswith("cuda") and not torch.cuda.is_available():
        print(f"cuda_check: no CUDA device here (torch {torch.__version__}, "
              f"built with CUDA {torch.version.cuda}); nothing compared.")
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False  # TF32 would differ from CPU fp32 at ~1e-3
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False

    if not env_is_reproducible(args):
        print(f"cuda_check: the {args.task} env is not reproducible (same seed and actions, different "
              "observations), so CPU and CUDA runs cannot be compared. Crafter iterates per-chunk sets of "
              "objects in memory-address order; env.py must make that order deterministic.")
        return 3
    logs_cpu, act_cpu = run("cpu", args)
    logs_dev, act_dev = run(args.against, args)
    same = min(len(act_cpu), len(act_dev))
    first_diff = np.flatnonzero((act_cpu[:same] != act_dev[:same]).any(axis=1))
    print(f"{len(act_cpu)} vector steps; actions identical: {len(first_diff) == 0}"
          + (f" (first difference at vector step {first_diff[0]})" if len(first_diff) else ""))
    print(f"{'update':>6} " + " ".join(f"{k.split('/')[1]:>22}" for k in KEYS))
    ok = len(logs_cpu) == len(logs_dev) and len(first_diff) == 0
    for i, (a, b) in enumerate(zip(logs_cpu, logs_dev, strict=False)):
        cells = []
        for k in KEYS:
            match = bool(np.isclose(a[k], b[k], rtol=args.rtol, atol=args.atol, equal_nan=True))
            ok &= match
            cells.append(f"{a[k]:+.4e}/{b[k]:+.4e}{' ' if match else '!'}")
        print(f"{i:>6} " + " ".join(f"{c:>22}" for c in cells))
    print(f"cuda_check: cpu vs {args.against}: " + ("MATCH" if ok else "MISMATCH")
          + f" (rtol {args.rtol}, atol {args.atol})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
