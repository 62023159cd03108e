"""The sandbox worker's cost: one primitive api call through the proxy vs a direct call, next to one
Crafter env step, measured side by side in one run; and the worker's start-up cost (once per env).

    python -m bench.sandbox_proxy              # 3000 calls per setting, median of 5 rounds
    python -m bench.sandbox_proxy --calls 10000

A proxied call is a round trip: the model's code (in the worker) encodes the arguments, the trainer
decodes them, calls the api and sends the result back. `api.steps_left()` does no env work, so its
proxied time is the whole overhead; it goes through an api that does not count steps, so the worker
cannot answer a repeat itself, as it does for the real api (the "memo" row: a call repeated before
the next env step). `api.noop()` takes a real env step either way, so the difference between its two
times is the overhead next to real work. Target: under 10% of an env step.
Wall-clock times: the worker is another process, so this process's CPU time would miss half the cost.
"""

import argparse
import statistics
import time

import crafter
import numpy as np

from env import make_env
from sandbox.host import Worker

LOOP = "def bench(api):\n    for _ in range({n}):\n        api.{call}()\n    return True\n"


class Unmemoized:
    """The api's steps_left() without its step count (`_steps`): every call is a round trip."""

    def __init__(self, api):
        self.api = api

    def steps_left(self) -> int:
        return self.api.steps_left()


def timed_us(run, n: int, setup=lambda: None) -> float:
    """Wall time per call of `run()` (which makes n calls), in microseconds; `setup` is not timed."""
    setup()
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) / n * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=3000, help="api.steps_left() calls per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    n = args.calls

    raw, rng = crafter.Env(seed=0, length=None), np.random.default_rng(0)
    raw.reset()
    env = make_env("crafter", 0)
    env.reset(seed=0)
    worker = Worker()
    start = time.perf_counter()
    worker.run("def nothing(api):\n    return True\n", "nothing", env.unwrapped.make_api(0))
    start_ms = (time.perf_counter() - start) * 1e3

    def direct(call: str, k: int):
        return lambda: [getattr(env.unwrapped.make_api(k), call)() for _ in range(k)]

    def proxied(call: str, k: int, wrap=lambda api: api):
        source = LOOP.format(n=k, call=call)
        return lambda: worker.run(source, "bench", wrap(env.unwrapped.make_api(k)), time_limit=60.0)

    # noop: a fresh episode each time, and few enough steps that the player survives (seed 0 dies at 143)
    fresh = {"steps_left": lambda: None, "noop": lambda: env.reset(seed=0)}
    counts = {"steps_left": n, "noop": 100}
    settings = {"crafter.Env.step": (lambda: [raw.step(int(a)) for a in rng.integers(17, size=500)], 500,
                                     lambda: None),
                "empty code action (one run)": (proxied("steps_left", 0), 1, lambda: None)}
    for call, k in counts.items():
        settings[f"api.{call}() direct"] = (direct(call, k), k, fresh[call])
        settings[f"api.{call}() proxied"] = (proxied(call, k, Unmemoized if call == "steps_left" else lambda a: a),
                                             k, fresh[call])
    settings["api.steps_left() memo"] = (proxied("steps_left", n), n, lambda: None)
    times = {name: [] for name in settings}
    for _ in range(args.rounds):  # interleaved, so that load from other jobs hits every setting alike
        for name, (run, k, setup) in settings.items():
            times[name].append(timed_us(run, k, setup))
    worker.close()
    env.close()
    median = {name: statistics.median(t) for name, t in times.items()}
    for name, us in median.items():
        print(f"{name:32s} {us:10.1f} us")
    step_us = median["crafter.Env.step"]
    rows = {call: (median[f"api.{call}() direct"], median[f"api.{call}() proxied"]) for call in counts}
    overhead = rows["steps_left"][1] - rows["steps_left"][0]
    noop = rows["noop"][1] - rows["noop"][0]
    print(f"proxy overhead per api call: {overhead:.1f} us = {overhead / step_us:.1%} of an env step "
          f"(target < 10%); next to a real step (noop x {counts['noop']}): {noop:.1f} us = {noop / step_us:.1%}")
    print(f"worker start-up (once per env, its first run included): {start_ms:.0f} ms "
          f"(median of {args.rounds} interleaved rounds above)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
