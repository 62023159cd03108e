"""Env throughput: raw Crafter vs our wrapped env vs vector envs, measured side by side in one run.

    python bench/env_sps.py                 # 3000 steps per setting
    python bench/env_sps.py --steps 10000

Random actions, resets included. The wrapper (task logic, Dict observation, code-action plumbing)
should cost under 10% of raw stepping: the ratio line says what it costs here. Single-process settings
are also timed in CPU time of this process, which other load on the machine barely disturbs; the ratio
uses it. Worker processes' settings can only be timed in wall-clock time.
"""

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import crafter
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import env as E  # noqa: E402


def timed(steps: int, step: Callable[[], None]) -> tuple[float, float]:
    """(wall-clock steps/s, this-process CPU-time steps/s) of `steps` calls."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    return steps / (time.perf_counter() - wall), steps / (time.process_time() - cpu)


def raw_crafter(steps: int, seed: int) -> tuple[float, float]:
    env, rng = crafter.Env(seed=seed), np.random.default_rng(seed)
    env.reset()

    def step():
        if env.step(int(rng.integers(17)))[2]:
            env.reset()

    return timed(steps, step)


def wrapped(steps: int, seed: int) -> tuple[float, float]:
    env, rng = E.make_env("crafter", seed), np.random.default_rng(seed)
    env.reset(seed=seed)

    def step():
        _, _, terminated, truncated, _ = env.step(int(rng.integers(17)))
        if terminated or truncated:
            env.reset()

    return timed(steps, step)


def vector(steps: int, seed: int, num_envs: int, async_: bool) -> tuple[float, float]:
    envs = E.make_vec_env("crafter", num_envs, async_=async_, seed=seed)
    rng = np.random.default_rng(seed)
    envs.reset(seed=seed)
    wall, cpu = timed(steps // num_envs, lambda: envs.step(rng.integers(17, size=num_envs)))
    envs.close()
    return wall * num_envs, (cpu * num_envs if not async_ else float("nan"))


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
    print(f"{'setting':32s} {'wall steps/s':>12s} {'CPU steps/s':>12s}   (median of {args.repeats} interleaved runs)")
    median = {}
    for name, runs in results.items():
        median[name] = np.median(np.array(runs), axis=0)
        print(f"{name:32s} {median[name][0]:12.0f} {median[name][1]:12.0f}")
    ratio = median["make_env (single)"][1] / median["raw crafter"][1]
    print(f"wrapped / raw (CPU time) = {ratio:.3f}  (wrapper overhead {100 * (1 - ratio):.1f}%)")


if __name__ == "__main__":
    main()
