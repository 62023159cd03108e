"""Env throughput: raw Crafter vs our wrapped env vs vector envs, measured side by side in one run.

    python bench/env_sps.py                 # 3000 steps per setting
    python bench/env_sps.py --steps 10000

Random actions, resets included. The wrapper (task logic, Dict observation, code-action plumbing)
should cost under 10% of raw stepping: the ratio line says what it costs here.
"""

import argparse
import sys
import time
from pathlib import Path

import crafter
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import env as E  # noqa: E402


def raw_crafter(steps: int, seed: int) -> float:
    env, rng = crafter.Env(seed=seed), np.random.default_rng(seed)
    env.reset()
    start = time.perf_counter()
    for _ in range(steps):
        _, _, done, _ = env.step(int(rng.integers(17)))
        if done:
            env.reset()
    return steps / (time.perf_counter() - start)


def wrapped(steps: int, seed: int) -> float:
    env, rng = E.make_env("crafter", seed), np.random.default_rng(seed)
    env.reset(seed=seed)
    start = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(int(rng.integers(17)))
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def vector(steps: int, seed: int, num_envs: int, async_: bool) -> float:
    envs = E.make_vec_env("crafter", num_envs, async_=async_, seed=seed)
    rng = np.random.default_rng(seed)
    envs.reset(seed=seed)
    start = time.perf_counter()
    for _ in range(steps // num_envs):
        envs.step(rng.integers(17, size=num_envs))
    sps = (steps // num_envs) * num_envs / (time.perf_counter() - start)
    envs.close()
    return sps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats; the median is shown")
    args = parser.parse_args()
    wrapped(50, 0)  # warm up numba's world generation once, outside the clock
    settings = {
        "raw crafter": lambda s: raw_crafter(args.steps, s),
        "make_env (single)": lambda s: wrapped(args.steps, s),
        "make_vec_env sync x1": lambda s: vector(args.steps, s, 1, False),
        "make_vec_env async x1 worker": lambda s: vector(args.steps, s, 1, True),
        "make_vec_env async x2 workers": lambda s: vector(args.steps, s, 2, True),
    }
    results = {name: [] for name in settings}
    for rep in range(args.repeats):  # interleave so that machine noise hits every setting alike
        for name, fn in settings.items():
            results[name].append(fn(rep))
    median = {name: float(np.median(v)) for name, v in results.items()}
    for name, sps in median.items():
        print(f"{name:32s} {sps:8.0f} steps/s   (runs: {', '.join(f'{v:.0f}' for v in results[name])})")
    ratio = median["make_env (single)"] / median["raw crafter"]
    print(f"wrapped / raw = {ratio:.3f}  (wrapper overhead {100 * (1 - ratio):.1f}%)")


if __name__ == "__main__":
    main()
