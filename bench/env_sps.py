"""Env throughput: crafter.Env against fastcrafter.Env, then our wrapped env and vector envs.

    python -m bench.env_sps                 # from the repo root
    python -m bench.env_sps --steps 10000 --resets 20

Part 1, crafter.Env vs fastcrafter.Env on the same seeds and the same random actions: steps/s with
rendering (episode ends reset outside the clock), resets/s after a warm-up reset, and memory per env
(tracemalloc: bytes still allocated per env after creating, resetting and stepping several envs, once
the module-level shared tables are built). Part 2: the wrapper (task logic, Dict observation,
code-action plumbing) should cost under 10% of raw stepping; the ratio line says what it costs here.
Single-process settings are timed in CPU time of this process, which other load on the machine barely
disturbs; the ratios use it. Worker processes' settings can only be timed in wall-clock time.
"""

import argparse
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

from env import make_crafter, make_env, make_vec_env
from envs import fastcrafter

# The reference is crafter.Env with insertion-ordered chunks (fastcrafter's one difference), as env.py builds it.
IMPLS = {"crafter.Env": lambda **kw: make_crafter("original", **kw), "fastcrafter.Env": fastcrafter.Env}


def step_rate(make: Callable, steps: int, seed: int) -> float:
    """CPU-time steps/s of `steps` random steps (with rendering); episode ends reset off the clock."""
    env, actions = make(seed=seed, length=None), np.random.default_rng(seed).integers(17, size=steps)
    env.reset()
    spent = 0.0
    for action in actions:
        start = time.process_time()
        done = env.step(int(action))[2]
        spent += time.process_time() - start
        if done:
            env.reset()
    return steps / spent


def reset_rate(make: Callable, resets: int, seed: int) -> float:
    env = make(seed=seed)
    env.reset()  # warm-up: first-use costs (compilation, caches) stay out of the clock
    start = time.process_time()
    for _ in range(resets):
        env.reset()
    return resets / (time.process_time() - start)


def memory_per_env(make: Callable, count: int = 8) -> float:
    """Bytes allocated per live env (created, reset, 20 steps), after one warm-up env."""
    warm = make(seed=0)
    warm.reset()
    warm.step(0)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    envs = [make(seed=i) for i in range(count)]
    for env in envs:
        env.reset()
        for _ in range(20):
            env.step(0)
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return used / count


def compare(steps: int, resets: int, seeds: int) -> None:
    rows = {}
    for name, make in IMPLS.items():
        rows[name] = (np.median([step_rate(make, steps, s) for s in range(seeds)]),
                      np.median([reset_rate(make, resets, s) for s in range(seeds)]),
                      memory_per_env(make))
    print(f"{'env':18s} {'steps/s':>9s} {'resets/s':>9s} {'KiB/env':>9s}   (CPU time, median of {seeds} seeds)")
    for name, (sps, rps, mem) in rows.items():
        print(f"{name:18s} {sps:9.0f} {rps:9.2f} {mem / 1024:9.0f}")
    (s0, r0, m0), (s1, r1, m1) = rows["crafter.Env"], rows["fastcrafter.Env"]
    print(f"fastcrafter / crafter: steps/s {s1 / s0:.2f}x, resets/s {r1 / r0:.2f}x, memory per env {m1 / m0:.2f}x")


def timed(steps: int, step: Callable[[], None]) -> tuple[float, float]:
    """(wall-clock steps/s, this-process CPU-time steps/s) of `steps` calls."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    return steps / (time.perf_counter() - wall), steps / (time.process_time() - cpu)


def raw_env(steps: int, seed: int) -> tuple[float, float]:
    env, rng = fastcrafter.Env(seed=seed), np.random.default_rng(seed)
    env.reset()

    def step():
        if env.step(int(rng.integers(17)))[2]:
            env.reset()

    return timed(steps, step)


def wrapped(steps: int, seed: int) -> tuple[float, float]:
    env, rng = make_env("crafter", seed), np.random.default_rng(seed)
    env.reset(seed=seed)

    def step():
        _, _, terminated, truncated, _ = env.step(int(rng.integers(17)))
        if terminated or truncated:
            env.reset()

    return timed(steps, step)


def vector(steps: int, seed: int, num_envs: int, async_: bool) -> tuple[float, float]:
    envs = make_vec_env("crafter", num_envs, async_=async_, seed=seed)
    rng = np.random.default_rng(seed)
    envs.reset(seed=seed)
    wall, cpu = timed(steps // num_envs, lambda: envs.step(rng.integers(17, size=num_envs)))
    envs.close()
    return wall * num_envs, (cpu * num_envs if not async_ else float("nan"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--resets", type=int, default=10, help="timed resets per seed (part 1)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds for part 1; the median is shown")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats; the median is shown")
    args = parser.parse_args()
    compare(args.steps, args.resets, args.seeds)
    print()
    wrapped(50, 0)  # warm up first-use costs once, outside the clock
    settings = {
        "raw fastcrafter.Env": lambda s: raw_env(args.steps, s),
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
    ratio = median["make_env (single)"][1] / median["raw fastcrafter.Env"][1]
    print(f"wrapped / raw (CPU time) = {ratio:.3f}  (wrapper overhead {100 * (1 - ratio):.1f}%)")


if __name__ == "__main__":
    main()
