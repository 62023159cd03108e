"""Training throughput, measured side by side in one run:

    python -m bench.ppo_sps                         # collect_wood, 8 envs x 128 steps, 4 x 4, 16384 steps each
    python -m bench.ppo_sps --steps 4096 --rounds 2 # a quick look
    python -m bench.ppo_sps --sides cd --threads 2  # ours against SB3 only, both on 2 torch threads

On the same task, world seeds and rollout sizes (8 envs x 128 steps, 4 minibatches x 4 epochs, 1 torch thread):
  (a) raw env: fastcrafter through env.make_vec_env, random actions, no learner;
  (b) today's old default: original Crafter (`crafter_impl="original"`) + ppo.PPO with the fp32 learner;
  (c) the new defaults: fastcrafter + ppo.PPO with precision="auto" (bf16 update where the CPU has bf16 units);
  (d) Stable-Baselines3 PPO (MultiInputPolicy, same n_steps/batch/epochs) on the same fastcrafter env.
Every side is built once and warmed up (one rollout, off the clock: numba compilation, first-call costs); then
the sides take turns, `--rounds` rounds of steps/rounds env steps each, so load from other jobs on the machine
falls on all sides alike. Rates are env steps per wall-clock second summed over the rounds; the CPU-time rate
(this process) is printed beside them. "learner" = (wall time - time inside the vector env's step) per env step.
Then one minibatch update of the learner alone, fp32 against bf16 autocast (same network, random pixels).
Memory: the process's peak RSS, all the sides run live at once (per-side RSS deltas proved meaningless: the
allocator reuses what earlier sides freed); per-env memory of the two Crafters is in bench/env_sps.py.
The last line is the issue's summary: X = c/b, Y = c/d, Z = c/a (targets X >= 2.5, Y >= 1.5). The line before it
gives the same ratios per round (min / median / max over the rounds, each round's sides measured back to back),
so whether a target holds in every round, not only on the sums, can be read off one run; on a machine shared
with other jobs the wall-clock ratios swing with their load, the CPU-time ones (this process's CPU seconds) much less.
SB3's side also moves with the state of glibc's heap (its fp32 update page-faults its big tensors in again, or not:
docs/measurements.md#ppo-throughput); MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4000000000 before the
command takes that out for every side.
--sides runs some of the sides only (the ratios of those present are printed); --threads sets every side's torch
threads (1 by default: the trainer's default; SB3, whose rollouts step the envs in the same process too, gets
the same). SB3 is a bench-only dependency: pip install -r bench/requirements.txt
"""

import argparse
import resource
import time

import gymnasium as gym
import numpy as np
import torch

import env as rl_env
from policy import Agent
from ppo import PPO, PPOConfig, seed_everything, use_bf16


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


class Side:
    """One measured setting: `run(n)` does n more env steps; wall/CPU/env time add up over the timed calls."""

    def __init__(self, label: str):
        self.label, self.steps, self.wall, self.cpu, self.env_time = label, 0, 0.0, 0.0, 0.0
        self.round_sps: list[float] = []  # one wall-clock rate per timed call (round), to read the spread off one run
        self.round_cpu_sps: list[float] = []  # and its CPU-time rate: what other jobs' load leaves untouched

    def timed(self, n: int) -> None:
        env_before, w, c = self.env_time_now(), time.perf_counter(), time.process_time()
        self.run(n)
        self.round_sps.append(n / (time.perf_counter() - w))
        self.round_cpu_sps.append(n / (time.process_time() - c))
        self.wall += time.perf_counter() - w
        self.cpu += time.process_time() - c
        self.env_time += self.env_time_now() - env_before
        self.steps += n

    def setup(self, warmup: int) -> None:
        self.build()
        self.run(warmup)

    def sps(self) -> float:
        return self.steps / self.wall


class RawEnv(Side):
    def __init__(self, args):
        super().__init__("(a) raw env (fastcrafter, random actions)")
        self.args = args

    def build(self) -> None:
        self.envs = TimedVecEnv(rl_env.make_vec_env(self.args.task, self.args.num_envs, seed=self.args.seed))
        self.envs.reset()
        self.rng, self.n_act = np.random.default_rng(self.args.seed), self.envs.single_action_space.n

    def run(self, n: int) -> None:
        for _ in range(n // self.envs.num_envs):
            self.envs.step(self.rng.integers(0, self.n_act, self.envs.num_envs))

    def env_time_now(self) -> float:
        return self.envs.step_time


class Ours(Side):
    def __init__(self, args, label: str, crafter_impl: str, precision: str):
        super().__init__(label)
        self.args, self.crafter_impl, self.precision = args, crafter_impl, precision

    def build(self) -> None:
        a = self.args
        seed_everything(a.seed)
        self.envs = TimedVecEnv(rl_env.make_vec_env(a.task, a.num_envs, seed=a.seed, crafter_impl=self.crafter_impl))
        agent = Agent(self.envs.single_observation_space, self.envs.single_action_space.n)
        cfg = PPOConfig(num_steps=a.num_steps, num_minibatches=a.minibatches, update_epochs=a.epochs,
                        precision=self.precision)
        self.ppo = PPO(agent, cfg, device="cpu", total_steps=a.steps + a.warmup)

    def run(self, n: int) -> None:
        self.ppo.train(self.envs, n)

    def env_time_now(self) -> float:
        return self.envs.step_time


class SB3(Side):
    def __init__(self, args):
        super().__init__("(d) SB3 PPO, fastcrafter")
        self.args = args

    def build(self) -> None:
        from stable_baselines3 import PPO as SB3PPO
        from stable_baselines3.common.vec_env import DummyVecEnv

        class TimedDummyVecEnv(DummyVecEnv):
            step_time = 0.0

            def step_wait(self):
                t = time.perf_counter()
                out = super().step_wait()
                self.step_time += time.perf_counter() - t
                return out

        a = self.args
        seed_everything(a.seed)  # SB3 itself gets no seed: it would reseed the envs' worlds on reset
        self.venv = TimedDummyVecEnv([lambda i=i: rl_env.make_env(a.task, a.seed, index=i) for i in range(a.num_envs)])
        self.model = SB3PPO("MultiInputPolicy", self.venv, n_steps=a.num_steps,
                            batch_size=a.num_steps * a.num_envs // a.minibatches, n_epochs=a.epochs,
                            learning_rate=2.5e-4, ent_coef=0.01, clip_range=0.2, device="cpu", verbose=0)

    def run(self, n: int) -> None:
        self.model.learn(total_timesteps=n, reset_num_timesteps=False)  # goes on with the same episodes

    def env_time_now(self) -> float:
        return self.venv.step_time


def update_ms(args, bf16: bool, reps: int = 16) -> float:
    """ms of one PPO minibatch (forward, backward, grad clip, Adam) of the learner alone, on random pixels."""
    envs = rl_env.make_vec_env(args.task, 1, seed=args.seed)
    agent = Agent(envs.single_observation_space, envs.single_action_space.n)
    ppo, n = PPO(agent, PPOConfig()), args.num_steps * args.num_envs // args.minibatches
    obs = {k: torch.randint(0, 10, (n, *s.shape), dtype=torch.uint8) for k, s in envs.single_observation_space.items()}
    start = 0.0
    for i in range(reps + 2):  # two warm-up calls
        start = time.perf_counter() if i == 2 else start
        logprob, value = agent.get_action_and_value(obs, torch.zeros(n, dtype=torch.long), bf16=bf16)[1::2]
        ppo.optimizer.zero_grad()
        (value.square().mean() - logprob.mean()).backward()
        torch.nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
        ppo.optimizer.step()
    return (time.perf_counter() - start) / reps * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="collect_wood")
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--num-steps", type=int, default=128, help="rollout length per env")
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--steps", type=int, default=16384, help="timed env steps per side (all rounds)")
    p.add_argument("--rounds", type=int, default=4, help="the sides take turns this many times")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sides", default="abcd", help="which of the sides (a)-(d) to run, e.g. cd")
    p.add_argument("--threads", type=int, default=1, help="torch threads, the same for every side")
    args = p.parse_args()
    if not args.sides or set(args.sides) - set("abcd"):
        p.error(f"--sides takes letters of abcd, not {args.sides!r}")
    if args.threads < 1:
        p.error("--threads must be at least 1")
    rollout = args.num_steps * args.num_envs
    chunk = args.steps // args.rounds
    if chunk < rollout or chunk % rollout:
        p.error(f"--steps / --rounds must be a multiple of one rollout ({rollout} env steps)")
    args.warmup = rollout
    torch.set_num_threads(args.threads)
    bf16 = use_bf16("auto", torch.device("cpu"))
    print(f"task {args.task}, {args.num_envs} envs x {args.num_steps} steps, {args.minibatches} minibatches x "
          f"{args.epochs} epochs, {args.threads} torch thread(s), {args.steps} timed env steps per side in "
          f"{args.rounds} rounds, "
          f"precision auto -> {'bf16' if bf16 else 'fp32'}, load average {open('/proc/loadavg').read().split()[0]}")
    every = {"a": RawEnv(args), "b": Ours(args, "(b) original Crafter + fp32 learner", "original", "fp32"),
             "c": Ours(args, "(c) fastcrafter + new defaults (auto)", "fast", "auto"), "d": SB3(args)}
    sides = [side for key, side in every.items() if key in args.sides]
    a, b, c, d = (every[k] if k in args.sides else None for k in "abcd")
    for side in sides:
        side.setup(args.warmup)
    for _ in range(args.rounds):
        for side in sides:
            side.timed(chunk)
    for s in sides:
        learner = "" if s is a else f"   learner {(s.wall - s.env_time) / s.steps * 1e6:6.0f} us/step"
        print(f"{s.label:42s} {s.sps():7.0f} SPS wall {s.steps / s.cpu:7.0f} SPS cpu{learner}")
    fp32, bf16 = update_ms(args, False), update_ms(args, True)
    print(f"learner alone, one {rollout // args.minibatches}-sample minibatch update: fp32 {fp32:.1f} ms, "
          f"bf16 {bf16:.1f} ms ({fp32 / bf16:.2f}x)")
    pairs = [(name, x) for name, x in (("c/b", b), ("c/d", d), ("c/a", a)) if c is not None and x is not None]
    print(f"peak RSS of the process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB; "
          f"load average now {open('/proc/loadavg').read().split()[0]}"
          + "".join(f"; cpu-time ratio {name} {x.cpu / c.cpu:.2f}" for name, x in pairs if x is not a))
    if not pairs:
        return
    for kind in ("round_sps", "round_cpu_sps"):
        ratios = lambda x, k=kind: sorted(u / v for u, v in zip(getattr(c, k), getattr(x, k), strict=True))
        spread = lambda r: f"{r[0]:.2f} / {float(np.median(r)):.2f} / {r[-1]:.2f}"
        print(f"per round, {'wall' if kind == 'round_sps' else 'cpu '} (min / median / max of {args.rounds}): "
              + ", ".join(f"{name} {spread(ratios(x))}" for name, x in pairs))
    words = {"c/b": "training speedup {:.2f}x over original", "c/d": "vs SB3 {:.2f}x", "c/a": "training/raw env {:.2f}"}
    print("; ".join(words[name].format(c.sps() / x.sps()) for name, x in pairs))


if __name__ == "__main__":
    main()
