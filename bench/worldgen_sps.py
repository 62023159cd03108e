"""World generation throughput: `crafter.worldgen.generate_world` vs `fastcrafter_worldgen.generate_world`.

    python -m bench.worldgen_sps                # 40 seeds, 3 alternating rounds
    python -m bench.worldgen_sps --seeds 100 --rounds 5

Both generate the same worlds (tests/test_fastcrafter_worldgen.py checks it); this times them side by side
on the same seeds after a warm-up (numba compiled or loaded from its cache), in rounds that alternate
between the two so that other load on the machine hits both alike. Each timing covers generate_world alone
on a freshly reset World with its Player; it is taken in this process's CPU time, which that load barely
disturbs. The ratio line is the resets/s target for world generation (>= 10x, aim 15x).
"""

import argparse
import time
from collections.abc import Callable

from crafter import constants, engine, objects, worldgen

from envs import fastcrafter_worldgen


def fresh(seed: int) -> tuple[engine.World, objects.Player]:
    """A World and Player as `crafter.Env.reset` has them just before it generates the world."""
    world = engine.World((64, 64), constants.materials, (12, 12))
    world.reset(seed=seed)
    player = objects.Player(world, (32, 32))
    world.add(player)
    return world, player


def cpu_seconds(generate: Callable, seeds: list[int]) -> float:
    worlds = [fresh(seed) for seed in seeds]
    start = time.process_time()
    for world, player in worlds:
        generate(world, player)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    seeds = list(range(args.seeds))
    impls = {"crafter": worldgen.generate_world, "fastcrafter": fastcrafter_worldgen.generate_world}
    warm = time.perf_counter()
    fastcrafter_worldgen.generate_world(*fresh(10**6))
    print(f"warm-up (numba compile or cache load): {time.perf_counter() - warm:.2f} s")
    totals = dict.fromkeys(impls, 0.0)
    for _ in range(args.rounds):
        for name, generate in impls.items():
            totals[name] += cpu_seconds(generate, seeds)
    rates = {name: args.rounds * len(seeds) / total for name, total in totals.items()}
    for name, rate in rates.items():
        print(f"{name:12s} {rate:8.1f} resets/s  ({1000 / rate:6.2f} ms per world, {len(seeds)} seeds x {args.rounds})")
    print(f"worldgen speedup {rates['fastcrafter'] / rates['crafter']:.2f}x")


if __name__ == "__main__":
    main()
