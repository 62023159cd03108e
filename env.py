"""Environments for RL-GPT: every backend's envs, with code actions as extra discrete (macro) actions.

    python env.py --list                                   # every task, with its step limit and success test
    python env.py --task collect_wood --demo               # play the built-in scripted code action
    python env.py --task collect_wood --demo --gif demo.gif

The backends each live in a file of their own: envs/crafter_env.py (the default, embedded) and
envs/minedojo_env.py (`minedojo:<task_id>` tasks; needs MineDojo installed). This file finds a task in
either, wraps any backend's env so code actions become actions, and builds vector envs.
Read top to bottom: tasks -> code actions -> vector envs -> the demo.
"""

from __future__ import annotations

import argparse
from copy import deepcopy

import gymnasium as gym
import numpy as np

from core import VIEW_KEYS, CodeAction, PrimitiveAPI, Task, can_start, succeeded, success_in_words
from envs import crafter_env, minedojo_env
from envs.crafter_api import CrafterAPI  # noqa: F401 (re-exported)
from envs.crafter_env import (  # noqa: F401 (the Crafter names most callers want, re-exported)
    ACHIEVEMENTS,
    ACTIONS,
    ALIASES,
    CRAFTER_IMPLS,
    EVAL,
    ITEMS,
    TASKS,
    TRAIN,
    CrafterEnv,
    make_crafter,
    world_seed,
)
from sandbox.host import Job, Worker, serve
from sandbox.limits import EpisodeEnded

# ----------------------------------------------------------------------------------------------
# Tasks of every backend.


def get_task(name: str) -> Task:
    """A task by name: `minedojo:<task_id>` is MineDojo's, anything else Crafter's (names or aliases).
    An unknown name is a ValueError naming it, with close matches from the same backend only."""
    if name.startswith(minedojo_env.PREFIX):
        return minedojo_env.get_task(name)
    return crafter_env.get_task(name)


def row_success(task: Task, row: dict) -> bool:
    """Whether a finished episode's stats row succeeded, by the task's own test (core.succeeded): a row that
    carries its own `success` (MineDojo's) says so itself; a Crafter row (crafter_env.stats_row) gives the
    achievements unlocked, the inventory (only for a test that reads it), its length and how it ended."""
    if "success" in row:
        return bool(row["success"])
    achievements = {k.removeprefix("achievement_"): v for k, v in row.items() if k.startswith("achievement_")}
    return succeeded(task.success, achievements, row.get("inventory", {}), row.get("length", 0),
                     not str(row.get("end", "")).startswith("died"))


def is_crafter(task: str) -> bool:
    """Whether a task runs on the embedded Crafter (else MineDojo): Crafter's stats rows, seeds, impls."""
    return not task.startswith(minedojo_env.PREFIX)


def game_of(task: str) -> str:
    """The game's name as the agents' prompts say it."""
    return "Crafter" if is_crafter(task) else "Minecraft (MineDojo)"


def api_for(task: str) -> type[PrimitiveAPI]:
    """The primitive API class code actions for this task are written against."""
    return CrafterAPI if is_crafter(task) else minedojo_env.MineDojoAPI


# ----------------------------------------------------------------------------------------------
# Code actions: each accepted function becomes one more discrete action (a macro action).


class CodeActionWrapper(gym.Wrapper):
    """Appends the code actions to the action space: action `n_base + i` runs code action i once.

    A code action with an initiation condition may start only where it holds: info["action_mask"] (after
    every reset and step) says which actions the next decision may choose, and PPO masks the rest.

    The code runs in this env's sandbox worker process (sandbox.host.Worker, started on the first
    code action) against the primitive API for at most `max_macro_steps` real environment steps. The
    transition reports `prim_steps` (the env steps it took: the semi-MDP's duration), whether the code
    returned True, the reward its steps earned (`code_reward`, the plain sum) and any error; every failure
    of model code, a source that does not compile included, is a failed code action in info["code_error"],
    never an exception in the trainer. A call that returns without True before taking any step (it refused)
    costs no step: the next decision is made in the same state, with that code action masked until a step is
    taken. That needs a chooser that reads the mask; `free_refusals=False` (--mode code's one program, called on
    every decision whatever the mask says) charges such a call one noop instead, so time always moves on. Under a
    plan that asks the RL agent to follow its order (`follow_order`), one that returns without True after steps
    may not start at the next decision either, so the first code action of that order that may start is one that
    has not just failed (PPO's teacher), as a routine goes on to its next behaviour when one fails.

    Its reward is the semi-MDP return sum_i gamma**i * r_i of its `prim_steps` steps (PPO then discounts the
    next value by gamma**prim_steps), so `gamma` must be PPO's; the default 1.0 gives the plain sum. The
    episode's logged return (info["episode"]["r"]) stays the undiscounted sum, as Crafter reports it.
    """

    def __init__(self, env: gym.Env, code_actions=(), max_macro_steps: int = 64, time_limit: float = 1.0,
                 gamma: float = 1.0, free_refusals: bool = True):
        super().__init__(env)
        self.sandbox = Worker()  # checks and compiles each action in the worker
        self.n_base = env.action_space.n
        self.max_macro_steps, self.time_limit, self.gamma = max_macro_steps, time_limit, gamma
        self.free_refusals = free_refusals  # a call that refuses costs no step (False: one noop)
        self.follow_order: list[int] | None = None  # set_follow_order
        self._refused: set[int] = set()  # code actions masked for the next decision (refused, or failed in order)
        self._obs = None  # the last observation, what a call that took no step returns
        self.code_actions: list[CodeAction] = []
        self.set_code_actions(code_actions)
        self._running = -1  # the code action started last (`start`)

    def set_code_actions(self, code_actions) -> None:
        """Grow the action list in place (append-only, so action indices keep their meaning); the
        episode going on is not touched, so new code actions never cut an episode."""
        code_actions = list(code_actions)
        if code_actions[:len(self.code_actions)] != self.code_actions:
            raise ValueError("code actions can only be appended: the existing ones must stay, in order")
        self.code_actions = code_actions  # compiled (and checked) in the worker, on first use
        self.action_space = gym.spaces.Discrete(self.n_base + len(self.code_actions))

    def set_follow_order(self, order: list[int] | None) -> None:
        """The plan's code actions in its order (indices into the code actions), under a plan whose rl_config
        has "follow_order": PPO teaches the first of them that may start, and a call that failed after steps is
        masked for the next decision. None: off."""
        self.follow_order, self._refused = (list(order) if order is not None else None), set()

    def action_mask(self) -> np.ndarray | None:
        """Which actions may start now (one bool per action, base then code actions): every base action, and each
        code action whose initiation holds in the current state (core.can_start over the backend's
        initiation_state, read once per step; an action without one, always), but for one that refused at once
        (until the next env step) and, under follow_order, one that failed after steps (for the next decision).
        None where nothing can be masked: no code action, or none with an initiation, refusals charged and no
        follow_order."""
        initiated = any(a.initiation for a in self.code_actions)
        if not self.code_actions or not (self.free_refusals or self.follow_order is not None or initiated):
            return None
        state = None  # read only where some code action has an initiation
        if initiated:
            with_view = any(a.initiation.get(k) for a in self.code_actions for k in VIEW_KEYS)
            state = self.env.unwrapped.initiation_state(with_view)
        ok = [i not in self._refused and (not a.initiation or can_start(a.initiation, *state))
              for i, a in enumerate(self.code_actions)]
        return np.array([True] * self.n_base + ok, dtype=bool)

    def _with_mask(self, info: dict) -> dict:
        """The info of a reset or a step, with the next decision's action mask when there is one."""
        mask = self.action_mask()
        return info if mask is None else dict(info, action_mask=mask)

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._obs, self._refused = obs, set()
        return obs, self._with_mask(info)

    def step(self, action):
        action = int(action)
        if action < self.n_base:
            obs, reward, terminated, truncated, info = self.env.step(action)
            self._obs, self._refused = obs, set()
            info.update(code_action=-1, code_ok=False, code_end="", code_error="", code_reward=0.0)
            return obs, reward, terminated, truncated, self._with_mask(info)
        job = self.start(action)
        serve([job])
        return self.finish(job)

    def start(self, action: int) -> Job:
        """Start code action `action` in this env's worker; once `serve` has given the job its result,
        `finish` makes the transition (CodeActionVectorEnv runs several envs' code actions at once)."""
        code = self.code_actions[int(action) - self.n_base]
        api = self.env.unwrapped.make_api(self.max_macro_steps, self.gamma)
        self._running = int(action) - self.n_base  # one code action at a time per env
        return self.sandbox.start(code.source, code.function, api, time_limit=self.time_limit)

    def finish(self, job: Job):
        """The code action's transition, from its finished job."""
        api, result, index = job.api, job.result, self._running
        took = api._steps  # before the noop charge below
        refused = took == 0 and result.returned is not True and not result.error and result.stopped is None
        if refused and self.free_refusals:  # no time passes; it may not start again before a step
            self._refused.add(index)
            obs, terminated, truncated, info = self._obs, False, False, {"success": False}
        else:
            if took == 0:  # an action that does nothing still costs one step: action 0 is every backend's noop
                try:
                    api._act(0)
                except EpisodeEnded:
                    pass
            obs, _, terminated, truncated, info = api._last
            self._obs, self._refused = obs, set()
        ok = result.returned is True or bool(info.get("success"))  # the task solved inside counts as done
        end = _call_end(ok, result, took)
        if end == "false_after_steps" and self.follow_order is not None:  # under an order: on to the next part
            self._refused = {index}
        info = dict(info, prim_steps=api._steps, code_action=index, code_ok=ok, code_end=end,
                    code_error=result.error or _stop_reason(result.stopped), code_reward=api._earned)
        return obs, api._reward, terminated, truncated, self._with_mask(info)

    def close(self) -> None:
        self.sandbox.close()
        super().close()


def _call_end(ok: bool, result, took: int) -> str:
    """How a call ended, as a key of prompts.common.CALL_ENDS: done; an error (the sandbox's own stops
    included); stopped by the step budget or the episode's end; else it returned without True, before or
    after taking env steps (`took`, not counting the noop a call that took none is charged)."""
    if ok:
        return "true"
    if result.error:
        return "error"
    if result.stopped in ("step_budget", "episode_ended"):
        return "step_budget" if result.stopped == "step_budget" else "episode_end"
    return "false_after_steps" if took else "false_at_once"


def _stop_reason(stopped: str | None) -> str:
    """A code action that ran out of budget failed; one that ended with the episode did not."""
    return "" if stopped in (None, "episode_ended") else f"stopped: {stopped}"


# ----------------------------------------------------------------------------------------------
# Construction: single and vector envs.


def make_env(task: str, seed: int | None = None, *, code_actions=(), max_macro_steps: int = 64,
             gamma: float = 1.0, crafter_impl: str = "fast", free_refusals: bool = True, **options) -> gym.Env:
    """A task env with code actions appended (none by default). `minedojo:<task_id>` uses MineDojo.
    `gamma` discounts the rewards inside a code action and `free_refusals` (False for a caller that ignores the
    action mask) says what a call that refuses costs (see CodeActionWrapper); `crafter_impl` (fast | original)
    picks the Crafter implementation and means nothing to MineDojo."""
    if is_crafter(task):
        env = CrafterEnv(task, seed=seed, crafter_impl=crafter_impl, **options)
    else:  # the `minedojo` package is imported only here: MineDojo needs gym 0.21 and JDK 8, Crafter neither
        env = minedojo_env.MineDojoEnv(task.removeprefix(minedojo_env.PREFIX), seed=seed, **options)
    return CodeActionWrapper(env, code_actions, max_macro_steps, gamma=gamma, free_refusals=free_refusals)


def make_vec_env(task: str, num_envs: int, *, code_actions=(), async_: bool = False, seed: int = 0,
                 rank: int = 0, stream: int = TRAIN, crafter_impl: str = "fast", **options) -> gym.vector.VectorEnv:
    """`num_envs` copies of the task; env i plays the worlds world_seed(seed, stream, rank, i, n) for
    its episodes n = 0, 1, ... Finished episodes reset in the same step (their last info sits in
    infos["final_info"], with the task's success and episode stats). Synchronous by default: on
    2 cores the worker processes measured no faster (bench/env_sps.py); the envs' code actions still
    run at the same time, in their sandbox workers (CodeActionVectorEnv)."""
    if not is_crafter(task):  # one world per simulator: env i keeps seed + i
        fns = [lambda i=i: make_env(task, seed + rank * num_envs + i, code_actions=code_actions, **options)
               for i in range(num_envs)]
    else:
        get_task(task)  # fail here with a clear message, not inside a worker process
        if crafter_impl not in CRAFTER_IMPLS:
            raise ValueError(f"crafter_impl must be one of {CRAFTER_IMPLS}, not {crafter_impl!r}")
        fns = [lambda i=i: make_env(task, seed, code_actions=code_actions, stream=stream, rank=rank, index=i,
                                    crafter_impl=crafter_impl, **options) for i in range(num_envs)]
    cls = gym.vector.AsyncVectorEnv if async_ else CodeActionVectorEnv
    return cls(fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


class CodeActionVectorEnv(gym.vector.SyncVectorEnv):
    """gymnasium's SyncVectorEnv (same-step autoreset), but the envs' code actions run at the same time:
    each starts in its worker process first, the other envs step while the workers run the code, and
    the trainer then answers all their api calls as they come (sandbox.host.serve). The results are
    those of stepping the envs one by one: each env's steps are its own, the transitions and infos are
    assembled in env order, and the episodes' stats rows are written in env order too (held meanwhile)."""

    def step(self, actions):
        each = list(gym.vector.utils.iterate(self.action_space, actions))
        coded = [i for i, (env, a) in enumerate(zip(self.envs, each, strict=True))
                 if isinstance(env, CodeActionWrapper) and a >= env.n_base]
        if not coded or self.autoreset_mode != gym.vector.AutoresetMode.SAME_STEP:
            return super().step(actions)
        held = [env.unwrapped for env in self.envs if hasattr(env.unwrapped, "held_rows")]
        for env in held:
            env.held_rows = []
        jobs, out = {}, {}
        try:
            for i in coded:  # one by one into `jobs`, so that an interrupt among them leaves none running
                jobs[i] = self.envs[i].start(each[i])
            for i, env in enumerate(self.envs):
                if i not in jobs:
                    out[i] = env.step(each[i])
                    serve(list(jobs.values()), wait=False)  # the calls waiting now, so workers need not wait
            serve(list(jobs.values()))
            out.update((i, self.envs[i].finish(job)) for i, job in jobs.items())
        finally:  # an exception (Ctrl-C) leaves no worker running and no row unwritten
            for job in jobs.values():
                if job.result is None:
                    job.worker.close()
            for env in held:
                env.write_held_rows()
        infos = {}
        for i, env in enumerate(self.envs):
            obs, self._rewards[i], self._terminations[i], self._truncations[i], info = out[i]
            if self._terminations[i] or self._truncations[i]:
                infos = self._add_info(infos, {"final_obs": obs, "final_info": info}, i)
                obs, info = env.reset()
            self._env_obs[i] = obs
            infos = self._add_info(infos, info, i)
        self._observations = gym.vector.utils.concatenate(self.single_observation_space, self._env_obs,
                                                          self._observations)
        self._autoreset_envs = np.logical_or(self._terminations, self._truncations)
        return (deepcopy(self._observations) if self.copy else self._observations, np.copy(self._rewards),
                np.copy(self._terminations), np.copy(self._truncations), infos)


def set_vec_code_actions(envs: gym.vector.VectorEnv, code_actions) -> None:
    """Grow every sub-env's code actions in place (`call` reaches worker processes too) and the
    vector env's action spaces with them: no env is reset, no episode cut."""
    envs.call("set_code_actions", list(code_actions))
    envs.single_action_space = envs.get_attr("action_space")[0]
    envs.action_space = gym.vector.utils.batch_space(envs.single_action_space, envs.num_envs)


# ----------------------------------------------------------------------------------------------
# Demo: the built-in scripted code action, written against the primitive API only.

CHOP_TREE = CodeAction("chop_tree", '''
def chop_tree(api):
    """Walk to the nearest visible tree (exploring if none is in view) and chop it once."""
    for direction in ["left", "up", "right", "down"]:
        if api.nearest("tree") is not None:
            break
        api.move(direction, 4)
    if not api.go_to("tree", 30):
        return False
    return api.do()
''', "Walk to the nearest visible tree and chop it once.")


def _demo(task: str, seed: int, gif: str | None) -> None:
    env = make_env(task, seed, code_actions=[CHOP_TREE])
    env.unwrapped.frames = []
    obs, _ = env.reset(seed=seed)
    obs, reward, terminated, truncated, info = env.step(env.unwrapped.action_space.n)  # the code action
    print(f"task {task}, seed {seed}: code action {CHOP_TREE.name!r} ran {info['prim_steps']} env steps, "
          f"returned {info['code_ok']}, error {info['code_error'] or 'none'}")
    print(f"reward {reward:.1f}, success {info['success']}, terminated {terminated}, truncated {truncated}")
    print("inventory:", {k: int(v) for k, v in zip(ITEMS, obs["inventory"], strict=True) if v})
    if gif:
        import imageio

        imageio.mimsave(gif, env.unwrapped.frames, duration=0.125)
        print(f"wrote {gif} ({len(env.unwrapped.frames)} frames)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="print the tasks and exit")
    parser.add_argument("--task", default="collect_wood")
    parser.add_argument("--demo", action="store_true", help="play the built-in scripted code action")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gif", help="write the demo's frames to this GIF")
    args = parser.parse_args(argv)
    if args.list:
        tasks = [*TASKS.values(), *minedojo_env.TASKS.values()]
        width = max(len(t.name) for t in tasks)
        for t in tasks:
            print(f"{t.name:{width}s} {t.max_steps:6d} steps  {t.description} Success: {success_in_words(t.success)}.")
        print("aliases: " + ", ".join(f"{a} -> {t}" for a, t in ALIASES.items()))
        print("minedojo:<task_id>: any other MineDojo task (needs MineDojo installed)")
        return 0
    try:
        get_task(args.task)
    except ValueError as e:
        parser.error(str(e))
    if args.demo:
        _demo(args.task, args.seed, args.gif)
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
