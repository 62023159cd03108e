"""The task planner's chain of sub-tasks as a curriculum: what RL is trained on, in order.

For a long task (make_stone_pickaxe, collect_iron, collect_diamond, the whole benchmark) the slow agent's
plan lists a chain of sub-tasks ("subtasks"), each a milestone of the game with its own success test (a
Crafter achievement). Training works on one at a time: the env pays a bonus for reaching the current
one (crafter_env.SUBTASK_REWARD) and the "rl" sub-actions serving it add their own RL config; training
moves on when the current sub-task is reached in THRESHOLD of recent episodes, or when its share of the
budget is spent. Episodes are never cut: every episode still plays for the whole task, and the whole
task's success is what every table reports. Policy and code actions carry forward from stage to stage.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

import distributed
from core import Mode, Plan
from run_state import LoopState

THRESHOLD = 0.6  # reached in this share of recent episodes: the sub-task is learned well enough to build on
WINDOW = 100  # recent episodes the threshold is judged over: one lucky run of short episodes is not enough
MIN_EPISODES = 20  # never judge a sub-task on fewer finished episodes than this (binomial s.e. <= 0.11)


@dataclass
class Curriculum:
    """Where training stands in the chain. Saved with the run (to_dict), so a resumed run goes on
    with the same sub-task."""

    subtasks: list[str]
    budget: int  # env steps of the whole run: each sub-task gets at most an equal share of them
    stage: int = 0
    stage_start: int = 0  # the env step its current stage began at
    recent: list[bool] = field(default_factory=list)  # current sub-task reached, per finished episode
    stages: list[dict] = field(default_factory=list)  # finished stages: sub-task, steps, why it ended

    def __post_init__(self):
        self.pending: list[bool] = []  # this process's episodes since the last update (not saved)

    def seen(self, infos: dict) -> None:
        """One vector step's infos: its finished episodes, and whether each reached the current sub-task."""
        self.pending += reached(infos)

    def update(self, global_step: int) -> str | None:
        """At a rollout boundary (every rank, in step): record every rank's episodes, maybe move on."""
        self.record(distributed.all_gather(self.pending))
        self.pending = []
        return self.advance(global_step)

    @property
    def current(self) -> str | None:
        """The sub-task being trained; None past the end of the chain (the whole task, no bonus)."""
        return self.subtasks[self.stage] if self.stage < len(self.subtasks) else None

    @property
    def share(self) -> int:
        return self.budget // max(1, len(self.subtasks))

    def record(self, reached: list[bool]) -> None:
        """Finished episodes: did each reach the current sub-task?"""
        self.recent = (self.recent + [bool(r) for r in reached])[-WINDOW:]

    def advance(self, global_step: int) -> str | None:
        """Move to the next sub-task when the current one is learned or its share of steps is spent;
        returns the reason when it moved (for the log), else None. The last sub-task stays current."""
        if self.stage >= len(self.subtasks) - 1:
            return None
        rate = sum(self.recent) / len(self.recent) if self.recent else 0.0
        if len(self.recent) >= MIN_EPISODES and rate >= THRESHOLD:
            why = f"reached in {rate:.2f} of the last {len(self.recent)} episodes (threshold {THRESHOLD})"
        elif global_step - self.stage_start >= self.share:
            why = (f"its share of the budget ({self.share} env steps) is spent; reached in {rate:.2f} "
                   f"of the last {len(self.recent)} episodes")
        else:
            return None
        self.stages.append({"subtask": self.current, "start": self.stage_start, "end": global_step,
                            "success": round(rate, 3), "episodes": len(self.recent), "why": why})
        self.stage, self.stage_start, self.recent = self.stage + 1, global_step, []
        return f"curriculum: {self.subtasks[self.stage - 1]} -> {self.current}: {why}"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Curriculum:
        return cls(**d)


def for_plan(saved: dict | None, plan: Plan | None, budget_left: int, step: int) -> Curriculum | None:
    """The run's curriculum for this plan: the saved one while the plan's chain is unchanged, a new one
    over the budget left when a re-plan changed the chain; None when the plan has no chain."""
    if plan is None or not plan.subtasks:
        return None
    if saved and saved["subtasks"] == plan.subtasks:
        return Curriculum.from_dict(saved)
    return Curriculum(list(plan.subtasks), budget_left, stage_start=step)


def reached(infos: dict) -> list[bool]:
    """The episodes that finished in one vector step: did each reach its env's current sub-task?"""
    final = infos.get("final_info", {})
    episode = final.get("episode", {})
    if "subtask_success" not in episode:
        return []
    return [bool(episode["subtask_success"][i]) for i in np.flatnonzero(final["_episode"])]


def plan_rl_config(mode: Mode, state: LoopState) -> dict:
    """The RL config in force now (the loop state's plan and curriculum), in the modes that use the plan's
    (rlgpt and rl+config); {} in the others."""
    if not Mode(mode).uses_plan_config or not state.plan:
        return {}
    cu = state.curriculum
    return rl_config_for(Plan.from_dict(state.plan), Curriculum.from_dict(cu).current if cu else None)


def rl_config_for(plan: Plan, subtask: str | None) -> dict:
    """The RL config in force while `subtask` is trained: the plan's own, plus the rl_config of each
    "rl" sub-action serving that sub-task (shaping weights added on top, masks joined); the plan's follow_order."""
    shaping = dict(plan.rl_config.get("shaping", {}))
    mask = list(plan.rl_config.get("mask_actions", []))
    for s in plan.subactions:
        if s.how == "rl" and s.rl_config and s.subtask == subtask:
            shaping.update(s.rl_config.get("shaping", {}))
            mask += [a for a in s.rl_config.get("mask_actions", []) if a not in mask]
    return {"shaping": shaping, "mask_actions": mask, **({"follow_order": True} if plan.rl_config.get("follow_order")
                                                          else {})}


def subtask_rows(rows: list[dict], subtasks: list[str]) -> list[str]:
    """summary.md's table: per iteration, the share of finished episodes that reached each sub-task
    (Crafter's stats rows, `achievement_<name>` > 0), with the episode count."""
    iterations = sorted({r.get("iteration", 0) for r in rows})
    lines = ["| iteration | episodes | " + " | ".join(subtasks) + " |", "|---" * (len(subtasks) + 2) + "|"]
    for iteration in iterations:
        its = [r for r in rows if r.get("iteration", 0) == iteration]
        rates = [sum(r.get(f"achievement_{t}", 0) > 0 for r in its) / len(its) for t in subtasks]
        lines.append(f"| {iteration} | {len(its)} | " + " | ".join(f"{x:.2f}" for x in rates) + " |")
    return lines
