"""What a run sends to the models, printed before anything is sent: `python train.py --show-prompt`.

Each mode sends its own messages, and this prints exactly those, built by the agents themselves with the
run's settings (a stand-in endpoint records them and fails, so nothing leaves the machine):

    rlgpt       the planner, the fast agent (for the reference plan's first code sub-action) and the critic
    rl+config   the planner and the critic (no code is written: the plan's RL config is what trains)
    code        the fast agent's request for the whole-task routine and the critic of that routine
    rl          nothing: plain PPO asks no model

Where a run measures something, the critic's message reads 0 or "not measured" here (a run's own numbers are
in iter_k/stats.json, and every message it sent, with the reply, in llm_transcript.jsonl).

    python train.py --task crafter --mode code --show-prompt
"""

from __future__ import annotations

import json

from code_actions import whole_task_subaction
from core import CodeAction, Mode, Plan, SubAction, Task, api_doc
from env import api_for, get_task, is_crafter
from fast_agent import FastAgent
from llm import LLMError, configured_endpoint
from reference import minedojo_skills, plans
from slow_agent import SlowAgent


class _Recorder:
    """An LLM stand-in: keeps what would be sent, then fails like a dead endpoint, so the agents build their
    messages exactly as in a run and send nothing."""

    vision = False

    def __init__(self):
        self.sent: list[tuple[list[dict], dict | None]] = []

    def chat(self, messages: list[dict], *, json_schema: dict | None = None, **_):
        self.sent.append((list(messages), json_schema))
        raise LLMError("--show-prompt sends nothing")


def no_prompt_note(settings: dict) -> str:
    """What --show-prompt says first when a run with these settings (train.py's llm, llm_url, mode) would send no
    prompt at all, so that nobody edits prompts/ and expects the reference backend to change; "" otherwise."""
    llm = settings.get("llm", "auto")
    if llm == "auto":
        llm = "http" if settings.get("llm_url") or configured_endpoint() else "reference"
    if Mode(settings.get("mode", Mode.RLGPT)) is Mode.RL or llm != "reference":
        return ""  # --mode rl says so itself, below
    return ("NOTE: a run with these settings sends no prompt at all (the reference backend plays the hand-written "
            "plans and code of reference/, no LLM), so an edit of prompts/ changes nothing in it. Below is what an "
            "LLM run (--llm http with an endpoint, or --llm local) would send.")


def _first_plan(task: Task, mode: Mode, settings: dict) -> tuple[Plan, SubAction | None]:
    """The plan a run of `mode` trains and the first code sub-action its fast agent is asked to write: the
    reference plan (what an LLM's plan would be in its place) or, under --mode code, the whole-task routine."""
    if mode == Mode.CODE:
        sub = whole_task_subaction(task.name, settings["max_macro_steps"])
        return Plan(task.name, [], [sub]), sub
    plan = Plan.from_dict((plans if is_crafter(task.name) else minedojo_skills).reference_plan(task.name), task)
    return plan, (plan.code_subactions[0] if plan.code_subactions and mode == Mode.RLGPT else None)


def show_prompts(settings: dict) -> str:
    """The messages an LLM run with these `settings` (train.py's: task, mode, hand_written, total_steps,
    iterations, num_envs, num_steps, eval_episodes, max_macro_steps) sends first, each headed by its sender."""
    task, mode, hand_written = get_task(settings["task"]), Mode(settings["mode"]), settings.get("hand_written", False)
    doc = api_doc(api_for(task.name), settings["max_macro_steps"])  # the doc says how many steps one call may take
    if mode == Mode.RL:
        return ("NOTE: a run with these settings sends no prompt at all (--mode rl is plain PPO: no plan, no code, "
                "no critic), so an edit of prompts/ changes nothing in it.")
    rec, out = _Recorder(), [no_prompt_note(settings)] if no_prompt_note(settings) else []
    plan, sub = _first_plan(task, mode, settings)
    first = settings["total_steps"] // settings["iterations"]
    stats = {"task": task.name, "mode": mode, "iteration": 1, "env_steps": first, "iteration_steps": [0, first],
             "rollout": {"num_envs": settings["num_envs"], "num_steps": settings["num_steps"]},
             "eval_episodes": settings["eval_episodes"], "max_macro_steps": settings["max_macro_steps"],
             "success_episodes": 0, "decisions": 0}
    written = [CodeAction(s.name, "", "") for s in plan.code_subactions]  # what the fast agent would write
    senders = [("fast agent", lambda: sub and FastAgent(rec, dry_run_task=task.name).write(sub, doc)),
               ("critic", lambda: SlowAgent(rec, hand_written=hand_written).critique(plan, written, stats))]
    if mode != Mode.CODE:  # --mode code has no planner: its one routine is the whole task
        senders.insert(0, ("planner", lambda: SlowAgent(rec).plan(task, doc)))
    out.append(f"--mode {mode} sends these messages first ({', '.join(what for what, _ in senders)}):")
    for what, call in senders:
        try:
            call()
        except LLMError:
            pass
        for messages, schema in rec.sent:
            out.append(f"========== {what} ==========" + (" (what a run measures reads 0 or 'not measured' here)"
                                                          if what == "critic" else ""))
            out += [f"----- {m['role']} -----\n{m['content']}" for m in messages]
            if schema:
                out.append(f"----- reply JSON schema (response_format, or appended to the prompt) -----\n"
                           f"{json.dumps(schema)}")
        rec.sent.clear()
    return "\n".join(out)
