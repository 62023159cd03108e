"""The run's code actions outside PPO: the append-only list of them (ActionSet), what the critic reads about
each (CodeStats), evaluation episodes with them, and --mode code's one whole-task program.

ActionSet and CodeStats go together (the statistics are keyed by the action set's action names); evaluate and
run_program are the two places that play the policy (or the one program) over these actions without PPO
training, so they sit next to them and train.py keeps only the loop that calls them.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm import tqdm

import distributed
from core import Plan, SubAction, success_in_words
from env import EVAL, CodeAction, get_task, is_crafter, make_env, set_vec_code_actions
from policy import Agent
from ppo import PPO, step_info
from prompts.common import CALL_ENDS
from reference import skills
from run_state import Run

# ----------------------------------------------------------------------------------------------
# Code actions across iterations: append-only, so PPO's action indices never change meaning.


@dataclass
class ActionSet:
    actions: list[CodeAction] = field(default_factory=list)
    active: dict[str, str] = field(default_factory=dict)  # sub-action name -> code action name in use

    def keep_only(self, subs: set[str]) -> None:
        """The plan moved every other sub-action to RL: its code action is masked from now on (never deleted)."""
        for name in [n for n in self.active if n not in subs]:
            self.active.pop(name)

    def current(self, sub: str) -> CodeAction | None:
        """The code action in use for sub-action `sub`, if any."""
        return next((a for a in self.actions if a.name == self.active.get(sub)), None)

    def add(self, sub: str, action: CodeAction, initiation: dict | None = None) -> CodeAction:
        """A rewritten sub-action gets a new versioned name; its old version stays, masked. `initiation` (the
        plan's, for this sub-action) is part of the code action: a new one alone makes a new version."""
        action = dataclasses.replace(action, initiation=dict(initiation or {}))
        current = self.current(sub)
        if current is not None and (current.source, current.initiation) == (action.source, action.initiation):
            return current  # the "rewrite" changed nothing: keep the action the agent already knows
        taken = {a.name for a in self.actions}
        name, v = sub, 1
        while name in taken:
            v += 1
            name = f"{sub}_v{v}"
        action = dataclasses.replace(action, name=name, entry=action.function,
                                     replaces=current.name if current is not None else "")
        self.actions.append(action)
        self.active[sub] = name
        return action

    def plan_order(self, plan: Plan) -> list[int]:
        """The code actions in use, as indices into `actions`, in the order of the plan's code sub-actions (a
        rewritten one takes its sub-action's place, not the end): the order a plan with "follow_order" teaches."""
        return [self.actions.index(a) for s in plan.code_subactions if (a := self.current(s.name)) is not None]

    def mask(self, base_actions: tuple[str, ...], masked_base: list[str]) -> np.ndarray:
        """Allowed actions: the env's own ones (`base_actions`, the task's names of them, less those the
        plan masks by name) and the code actions in use."""
        live = set(self.active.values())
        base = [name not in masked_base for name in base_actions]
        return np.array(base + [a.name in live for a in self.actions], dtype=bool)

    def hand_written(self) -> list[str]:
        """The code actions in use that are hand-written (their doc carries skills.LABEL), not model output:
        every place that lists code actions labels them."""
        in_use = set(self.active.values())
        return [a.name for a in self.actions if a.name in in_use and a.doc.startswith(skills.LABEL)]

    def in_use_text(self) -> str:
        """The code actions in use for the log, each hand-written one labelled so (all at once when all are)."""
        names, labelled = list(self.active.values()), set(self.hand_written())
        if names and labelled == set(names):
            return ", ".join(names) + " (all hand-written, not LLM output)"
        return ", ".join(n + (" (hand-written, not LLM output)" if n in labelled else "") for n in names) or "none"


def reuse_skill(skill_library, name: str, check, iteration: int, hand_written: bool) -> CodeAction | None:
    """The plan said "reuse": the skill library's best version of `name`, through `check` (the fast agent's
    sandbox check and dry run, as for new code); None if it fails them, no skill library is in use, or it is
    hand-written and `hand_written` does not allow that (then the fast agent writes the sub-action after all)."""
    if skill_library is None:
        return None
    action, why = skill_library.reuse(name, check)
    if action is not None and action.doc.startswith(skills.LABEL) and not hand_written:
        action, why = None, "it is hand-written, and this LLM run uses no hand-written code (see --hand-written)"
    tqdm.write(f"[iter {iteration}] {name!r}: " + (f"reused {why} from the skill library, no LLM call" if action
                                                   else f"not reused ({why}): the fast agent writes it"))
    return action


def _empty_row() -> dict:
    """One code action's counts in CodeStats: calls, calls that returned True, env steps, the reward earned
    inside the calls (did running it pay?), error texts, and how its calls ended (prompts.common.CALL_ENDS)."""
    return {"chosen": 0, "ok": 0, "steps": 0, "reward": 0.0, "errors": Counter(), "ends": Counter()}


class CodeStats:
    """What the critic reads about each code action (how often chosen, how often it worked, its cost) and
    about the training episodes that finished meanwhile: (env steps, success) of each, for evidence.py."""

    def __init__(self, action_set: ActionSet):
        self.action_set, self.decisions = action_set, 0
        self.rows: dict[str, dict] = {}
        self.episodes: list[tuple[int, bool]] = []

    def _row(self, name: str) -> dict:
        return self.rows.setdefault(name, _empty_row())

    def __call__(self, actions: np.ndarray, infos: dict) -> None:
        n = len(actions)
        self.decisions += n
        which, ok, steps, reward, err, end = (step_info(infos, k, d, n) for k, d in (
            ("code_action", -1), ("code_ok", False), ("prim_steps", 1), ("code_reward", 0.0), ("code_error", ""),
            ("code_end", "")))
        for i in np.flatnonzero(which >= 0):
            row = self._row(self.action_set.actions[int(which[i])].name)
            row["chosen"] += 1
            row["ok"] += bool(ok[i])
            row["steps"] += int(steps[i])
            row["reward"] += float(reward[i])
            if err[i]:
                row["errors"][str(err[i]).splitlines()[0][:160]] += 1
            if end[i]:
                row["ends"][str(end[i])] += 1
        final = infos.get("final_info", {})
        if "episode" in final:
            ep = final["episode"]
            self.episodes += [(int(ep["l"][i]), bool(ep["success"][i])) for i in np.flatnonzero(final["_episode"])]

    def restore(self, decisions: int, rows: dict, episodes: list | None = None) -> None:
        """Counts kept by a checkpoint; a count it predates starts at zero (old checkpoints resume)."""
        self.decisions = decisions
        self.rows = {name: {**_empty_row(), **r, "ends": Counter(r.get("ends", {}))} for name, r in rows.items()}
        self.episodes = [(int(n), bool(ok)) for n, ok in episodes or []]

    def totals(self) -> tuple[int, dict, list]:
        """Every rank's counts summed and episodes joined, as a copy (this rank's own stay as they are):
        what a checkpoint keeps."""
        decisions, rows, episodes = 0, {}, []
        for d, rs, eps in distributed.all_gather([(self.decisions, self.rows, self.episodes)]):
            decisions += d
            episodes += eps
            for name, r in rs.items():
                row = rows.setdefault(name, _empty_row())
                for key in row:
                    row[key] += r[key]
        return decisions, rows, episodes

    def gather(self) -> None:
        """Sum every rank's counts so the critic reads the whole run (a no-op on one process)."""
        self.decisions, self.rows, self.episodes = self.totals()

    def summary(self) -> dict:
        """Per code action chosen: the rates the critic reads, and whether it is hand-written (skills.LABEL),
        so stats.json and the result files made from it say so."""
        hand = {a.name for a in self.action_set.actions if a.doc.startswith(skills.LABEL)}
        return {name: {"chosen": r["chosen"], "share": round(r["chosen"] / max(1, self.decisions), 4),
                       "success_rate": round(r["ok"] / r["chosen"], 3),
                       "mean_steps": round(r["steps"] / r["chosen"], 2),
                       "mean_reward": round(r["reward"] / r["chosen"], 3),
                       "errors": [list(e) for e in r["errors"].most_common(3)],
                       "ends": {end: r["ends"][end] for end in CALL_ENDS}, "hand_written": name in hand}
                for name, r in self.rows.items()}


# ----------------------------------------------------------------------------------------------
# Evaluation and the whole-task program of --mode code.


def evaluate(agent: Agent, args, action_set: ActionSet, mask: np.ndarray, iteration: int, gamma: float,
             fixed_action: int | None = None, follow_order: list[int] | None = None) -> dict:
    """Fresh worlds from the evaluation seed stream (training never plays them), the sampled policy (or the
    program `fixed_action`, whose refusals cost a noop as in training), under the training envs' follow_order;
    returns Crafter rows of the episodes, the frames of the first episode (for the GIF) and of the first failed
    one (for a vision critic)."""
    options = {"stream": EVAL, "index": iteration} if is_crafter(args.task) else {}
    env = make_env(args.task, args.seed, code_actions=action_set.actions, max_macro_steps=args.max_macro_steps,
                   gamma=gamma, crafter_impl=args.crafter_impl, free_refusals=fixed_action is None, **options)
    env.set_follow_order(follow_order)
    env.unwrapped.frames = []
    env.unwrapped.iteration = iteration + 1  # 1-based, as iter_1/ and the log
    device = next(agent.parameters()).device
    results, rows, first_frames, failed_frames = [], [], None, None
    for ep in range(args.eval_episodes):
        seed = None if is_crafter(args.task) else 10_000_000 + 1000 * args.seed + 100 * iteration + ep
        obs, info = env.reset(seed=seed)
        done = False
        while not done:
            if fixed_action is not None:
                action = fixed_action
            else:
                with torch.no_grad():
                    t = {k: torch.as_tensor(v[None], device=device) for k, v in obs.items()}
                    allowed = mask & info["action_mask"] if "action_mask" in info else mask  # as in training
                    m = torch.as_tensor(allowed[None], device=device)
                    action = int(agent.get_action_and_value(t, mask=m)[0].item())
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        results.append(info["episode"])
        if is_crafter(args.task):
            rows.append(env.unwrapped.stats_row())
        first_frames = first_frames or list(env.unwrapped.frames)
        if not info["episode"]["success"] and failed_frames is None:
            failed_frames = list(env.unwrapped.frames)
    env.close()
    return {"success_rate": float(np.mean([r["success"] for r in results])),
            "mean_length": float(np.mean([r["l"] for r in results])),
            "mean_return": float(np.mean([r["r"] for r in results])),
            "env_steps": int(sum(r["l"] for r in results)), "rows": rows,
            "frames": first_frames or [], "failed_frames": failed_frames or []}


def run_program(run: Run, ppo: PPO, action: int, steps: int, on_step, progress, on_log, on_update) -> dict:
    """--mode code: every decision calls the one program, on the run's envs (reset once, when first
    used); the same budget, step count and statistics as PPO, logged every num_steps vector steps."""
    envs, log_every = run.envs, ppo.cfg.num_steps
    if not run.envs_started:
        envs.reset()
        run.envs_started = True
    start, episodes, logged, vector_steps = ppo.global_step, [], 0, 0
    while ppo.global_step - start < steps:
        actions = np.full(envs.num_envs, action)
        _, _, _, _, infos = envs.step(actions)
        n = distributed.sum_over_ranks(int(step_info(infos, "prim_steps", 1, len(actions)).sum()))
        ppo.global_step += n
        vector_steps += 1
        on_step(actions, infos)
        progress(n)
        final = infos.get("final_info", {})
        if "episode" in final:
            episodes += [bool(final["episode"]["success"][i]) for i in np.flatnonzero(final["_episode"])]
        if vector_steps % log_every == 0 or ppo.global_step - start >= steps:
            episodes[logged:] = distributed.all_gather(episodes[logged:])
            if len(episodes) > logged:
                on_log({"charts/success_rate": float(np.mean(episodes[logged:])),
                        "charts/success_episodes": len(episodes) - logged}, ppo.global_step)
            logged = len(episodes)
            on_update(ppo.global_step)
    return {"env_steps": ppo.global_step - start, "episodes": len(episodes), "success_episodes": len(episodes),
            "success_rate": float(np.mean(episodes)) if episodes else float("nan")}


def whole_task_subaction(task_name: str, max_macro_steps: int) -> SubAction:
    """--mode code's one sub-action: the whole task as one routine, called on every decision."""
    task = get_task(task_name)
    chain = ", ".join(task.prerequisites) or "none"
    return SubAction(
        name="solve_task", how="code", reason="--mode code: the pure code-as-policy baseline",
        spec=f"Solve the whole task: {task.description} Success test: {success_in_words(task.success)}. What "
             f"is usually needed first, in order: {chain}. The function is called again and again until the episode "
             f"ends; one call may take at most {max_macro_steps} env steps, so each call does the next step "
             "the inventory and the view allow (e.g. walk to a tree and collect one wood, or place the table; "
             "explore when nothing useful is visible), then returns: True if it made progress, else False.")


def grow_actions(ppo: PPO, envs, action_set: ActionSet, n_base: int, mask: np.ndarray) -> None:
    """New code actions join the agent (Agent.extend) and the run's envs (in place, no reset). A rewrite
    (v2) starts from the logit row of the version it replaces; a new action's prior is taken over the
    actions `mask` (this iteration's, over every action the action set holds) allows."""
    agent = ppo.agent
    grow = n_base + len(action_set.actions) - agent.n_actions
    if grow <= 0:
        return
    names = [a.name for a in action_set.actions]
    copy_from = [n_base + names.index(a.replaces) if a.replaces in names else None
                 for a in action_set.actions[-grow:]]
    agent.extend(grow, prior=ppo.cfg.new_action_prior, obs=ppo.next_obs, mask=mask[:agent.n_actions],
                 copy_from=copy_from)
    set_vec_code_actions(envs, action_set.actions)
