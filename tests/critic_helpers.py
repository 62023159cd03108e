"""Helpers shared by tests/test_critic.py and tests/test_critic_llm.py (no tests here): the reference plan
of a task, and the iteration statistics a critic reads, as code_actions.CodeStats and train.py give them."""

from __future__ import annotations

from core import Plan
from reference import plans


def reference(task: str) -> Plan:
    return Plan.from_dict(plans.reference_plan(task))


def row(chosen: int, success_rate: float, errors: int = 0) -> dict:
    """One code action's statistics as code_actions.CodeStats.summary() gives them."""
    return {"chosen": chosen, "share": 0.1, "success_rate": success_rate, "mean_steps": 4.0, "mean_reward": 0.25,
            "errors": [["line 5: IndexError: list index out of range", errors]] if errors else []}


def stats_with(code_actions: dict, stalls: dict | None = None) -> dict:
    return {"task": "make_wood_pickaxe", "mode": "rlgpt", "iteration": 1, "success_rate": 0.05,
            "success_episodes": 40, "success_trend": [0.02, 0.05], "code_actions": code_actions,
            **({"stalls": stalls} if stalls else {})}
