"""The slow agent of RL-GPT: plans which sub-actions are code and which are RL, and criticises results.

The slow loop of the paper: `plan()` splits a task into sub-actions (each marked "code" for the fast
agent to write, or "rl" to be left to PPO) plus a small RL configuration; after training,
`critique()` reads the real statistics of every code action and says what to change; the next
`plan()` gets that feedback with the previous plan. Replies are JSON checked by a schema and then by
`Plan.from_dict`; every rejection goes back to the model with the exact error, a few times at most.

With `llm=None` the agent is the hand-written library backend: the plan is `skills.reference_plan`
(`minedojo_skills.reference_plan` for a MineDojo task) and the critic is the rule-based one of
critic.py. Nothing there is LLM output, and it says so. The critic's Feedback, its checks and how it
changes a plan live in critic.py, for both backends.

    python slow_agent.py --task collect_diamond      # print the planner's prompt, exactly as sent
    python train.py --task crafter --show-prompt     # the planner's, fast agent's and critic's messages
    python skills.py --task collect_diamond          # the hand-written reference plan of that task
"""

from __future__ import annotations

import argparse
import json

import curriculum as CU
import minedojo_skills
import skills
from core import MAX_SUBACTIONS, SHAPING_RANGE, CodeAction, Plan, Task, api_doc
from crafter_env import SUBTASK_REWARD
from critic import (
    FEEDBACK_SCHEMA,
    Feedback,
    apply_feedback,
    check_feedback,
    rule_based_critique,
)
from critic_prompt import critic_messages
from env import api_for, game_of, get_task, is_crafter
from llm import LLMError, LLMReplyError

# ----------------------------------------------------------------------------------------------
# Prompt templates: exactly what the model sees.

PLAN_SYSTEM = """You are the slow agent of RL-GPT, planning for the game {game}. You split a task into \
sub-actions and decide for each whether it is written as code ("code") or learned by reinforcement \
learning ("rl"). Code suits a clear procedure over the API (walk to a visible target and act on it, \
craft, place, repeat an action); RL suits trial and error and reacting to what is seen (exploring, \
fighting, surviving). Each code sub-action becomes one extra action the RL agent may choose; it \
always keeps the base actions too."""

PLAN_PROMPT = """Task `{task}`: {description}
Prerequisite chain (what is normally done first, in order): {chain}

Primitive API that code sub-actions are written against:
{api_doc}

Base actions of the RL agent: {actions}
Milestones (what a sub-task can be, each with its own success test): {milestones}

Reply with JSON:
- "subtasks": {subtasks_rule}
- "subactions": 1 to {max_subactions} items {{"name": unique snake_case name, "how": "code" or "rl", \
"spec": one paragraph saying what it must do and when it has succeeded, "reason": why code or rl; \
optionally "subtask": the sub-task (from "subtasks") it serves, for an "rl" sub-action its own \
"rl_config" (same menu as below), used on top of the plan's while that sub-task is being trained, and \
for a "code" sub-action its "initiation": {initiation}}}.
- "rl_config": only from this menu: "shaping": {{inventory item: reward per unit gained, {lo} to {hi}}} \
with items from {items}; "mask_actions": base actions the RL agent never needs for this task.
A "code" sub-action's spec is all its code writer reads, with the API doc above and an example: it never \
sees the other sub-actions, their specs or their code, so each spec must stand alone (never "as X does"). \
Its success test must be observable through the API (an inventory count, what view() or in_front() \
shows), and what it asks must fit in one call's step budget (see "How a code action runs").
An "initiation" says where a code sub-action can start (the options framework's initiation set): the RL \
agent may choose it only in states where every condition holds, checked before each of its decisions; \
without one it may be chosen anywhere. A call that cannot do its job still costs a decision and at least \
one step, so give the conditions it certainly needs (e.g. a recipe's materials held, its station in \
view), never one that would hide a state where it could succeed."""

INITIATION_VIEW = ('{{"inventory": {{item: held at least this many}}, "in_view": [names that must all be in the '
                   'view: {cells}]}}, each part optional')
INITIATION_INVENTORY = '{{"inventory": {{item: held at least this many}}}} (this game\'s API has no view to test)'

SUBTASKS_LONG = ("this task has a long prerequisite chain, so first list the chain of sub-tasks that "
                 "reaches it, in order, ending with the task itself; then give sub-actions that serve them. ")
SUBTASKS_BENCHMARK = ("this task has no single goal, so you may list a chain of achievements to learn first, in "
                      "order (e.g. the tech tree towards the diamond), or [] for none. ")
CURRICULUM = ("Training follows the chain as a curriculum, one sub-task at a time, so each sub-task must be one "
              "of the milestones above: reaching the current one for the first time in an episode pays {bonus} on "
              "top of the task's own reward, and training moves on to the next once the current one is reached "
              "in {threshold:.0%} of the last {window} finished episodes (judged on at least {min_episodes}) or "
              "its equal share of the run's environment steps is spent; the last one then stays current. Every "
              "episode still plays for the whole task, and every success rate reported is the whole task's, "
              "never the current sub-task's.")
SUBTASKS_SHORT = "[] (the task is short enough to plan directly)."
SUBTASKS_MINEDOJO = "[] (no curriculum runs on MineDojo: the sub-actions serve the task as a whole)."

LIBRARY_NOTE = """

Skills in the library (code actions accepted and measured in earlier runs; name: what it does):
{skills}
To use one as it is, give a "code" sub-action with exactly its name and "reuse": true: its code is taken \
from the library and checked again, and no new code is written (if it fails the check, new code is written \
from your spec). Leave "reuse" out for code that must be written anew."""

REPLAN_PROMPT = """

Your previous plan was trained with RL. The plan, with the critic's moves and RL config applied:
{previous}
The critic's feedback:
{feedback}
Revise the plan: follow the critic's moves between code and rl unless you have a good reason not to. A \
"code" sub-action that keeps its name keeps the code accepted for it as it is: nothing is rewritten \
unless the critic's "fixes" name it (the code writer then gets that note and the code); a new spec under \
an old name changes no code. To have code written anew, give the sub-action a new name."""

MOVED_NOTE = "moved to {how} by the critic; its old spec was written for {was} and is left out: write a new one"

REPAIR_PROMPT = "Your reply was rejected: {error}\nReply again with only the whole corrected JSON."

# ----------------------------------------------------------------------------------------------
# The safe menu and the reply schemas.

LONG_CHAIN = skills.LONG_CHAIN  # tasks with this many prerequisites get the planner's sub-task chain

_STR, _STRS = {"type": "string"}, {"type": "array", "items": {"type": "string"}}
PLAN_SCHEMA = {"type": "object", "required": ["subtasks", "subactions", "rl_config"], "properties": {
    "subtasks": _STRS,
    "subactions": {"type": "array", "minItems": 1, "items": {
        "type": "object", "required": ["name", "how", "spec", "reason"],
        "properties": {"name": _STR, "how": {"enum": ["code", "rl"]}, "spec": _STR, "reason": _STR,
                       "reuse": {"type": "boolean"}, "subtask": _STR,
                       "rl_config": {"type": "object"}, "initiation": {"type": "object", "properties": {
                           "inventory": {"type": "object", "additionalProperties": {"type": "integer"}},
                           "in_view": _STRS}}}}},
    "rl_config": {"type": "object", "properties": {
        "shaping": {"type": "object", "additionalProperties": {"type": "number"}}, "mask_actions": _STRS}}}}


class AgentError(Exception):
    """The model kept replying with something unusable after every repair (or a hand-written reference
    plan is invalid); the message says what."""


# ----------------------------------------------------------------------------------------------
# The agent.

class SlowAgent:
    """Planner and critic. `llm` is an LLMClient/ReplayClient, or None for the hand-written library."""

    def __init__(self, llm=None, *, max_repairs: int = 2, hand_written: bool | None = None):
        self.llm, self.max_repairs = llm, max_repairs
        # whether the critic may choose skills.py's hand-written variants: always without an LLM, in an LLM
        # run only when its user asked (train.py --hand-written)
        self.hand_written = llm is None if hand_written is None else hand_written
        self.library: dict[str, str] = {}  # skill library: name -> one line; train.py fills it before plan()
        self.last_rejections: list[str] = []  # why each reply of the last plan()/critique() was rejected

    def plan(self, task: Task, env_doc: str, feedback: Feedback | None = None,
             previous: Plan | None = None) -> Plan:
        """A validated plan; from the second iteration on, `feedback` and `previous` revise it. Both backends
        start a revision from the same place: the previous plan with the critic's decisions applied."""
        if feedback is not None and previous is not None:
            previous = apply_feedback(previous, feedback)
        if self.llm is None:
            return self._library_plan(task, feedback, previous)

        def parse(data: dict) -> Plan:
            plan = Plan.from_dict({**data, "task": task.name}, task)
            if _subtasks_rule(task) == SUBTASKS_LONG and not plan.subtasks:
                raise ValueError(f"`{task.name}` has a long prerequisite chain: list the chain of "
                                 "sub-tasks in \"subtasks\" first")
            unknown = [s.name for s in plan.subactions if s.reuse and s.name not in self.library]
            if unknown:
                raise ValueError(f"{unknown} say \"reuse\": true but are not in the skill library; reuse only "
                                 f"{sorted(self.library) or 'nothing (this run has no skill library)'}, or leave "
                                 "reuse out (a code sub-action that keeps its name keeps its accepted code)")
            return plan

        messages = plan_messages(task, env_doc, feedback, previous, self.library)
        schema = PLAN_SCHEMA if self.library else _without_reuse(PLAN_SCHEMA)
        return self._ask(messages, schema, parse, "plan", max_tokens=2048)

    def critique(self, plan: Plan, code_actions: list[CodeAction], stats: dict,
                 frames: list[bytes] | None = None) -> Feedback:
        """What went wrong in the last RL round; frames are only sent to a vision-capable model."""
        if self.llm is None:
            return check_feedback(rule_based_critique(plan, code_actions, stats), plan)
        frames = list(frames or []) if getattr(self.llm, "vision", False) else []

        def parse(data: dict) -> Feedback:  # the same checks as the rule-based critic's feedback gets
            return check_feedback(Feedback.from_dict(data), plan, variants_allowed=self.hand_written)

        messages = critic_messages(plan, _plan_text(plan), code_actions, stats, self.hand_written, len(frames))
        offered = {k: v for k, v in FEEDBACK_SCHEMA["properties"].items() if self.hand_written or k != "variants"}
        schema = {**FEEDBACK_SCHEMA, "properties": offered}  # nothing offered that does not exist
        return self._ask(messages, schema, parse, "critique", images=frames or None)

    def _ask(self, messages: list[dict], schema: dict, parse, what: str, **chat_args):
        """Ask for JSON until `parse` accepts it, feeding each rejection back with its exact error.

        The user gets the problem without the instructions meant for the model (`last_rejections`, and
        the AgentError, which quotes the start of the last reply). Transport failures (LLMError) are
        not the model's fault and propagate unchanged."""
        messages, self.last_rejections = list(messages), []
        for _ in range(self.max_repairs + 1):
            try:
                reply = self.llm.chat(messages, json_schema=schema, **chat_args)
                return parse(reply.data)
            except LLMReplyError as e:  # not JSON or off the schema: the client checked it
                error, problem, bad = str(e), e.problem, e.text
            except ValueError as e:  # on the schema but not a valid plan or feedback
                error, problem, bad = str(e), str(e), reply.text
            self.last_rejections.append(problem)
            if bad:
                messages.append({"role": "assistant", "content": bad})
            messages.append({"role": "user", "content": REPAIR_PROMPT.format(error=error)})
        began = f"; its last reply began {' '.join(bad.split())[:120]!r}" if bad else ""
        raise AgentError(f"the slow agent's {what} was still invalid after {self.max_repairs} "
                         f"repair(s); last problem: {problem}{began}")

    def _library_plan(self, task: Task, feedback: Feedback | None, previous: Plan | None) -> Plan:
        """The hand-written reference plan; a re-plan is the previous plan with the critic's decisions applied."""
        try:
            reference = (skills if is_crafter(task.name) else minedojo_skills).reference_plan(task.name)
            plan = Plan.from_dict({**reference, "task": task.name}, task)
        except ValueError as e:
            raise AgentError(f"the hand-written reference plan of {task.name!r} is invalid: {e}") from e
        if feedback is None:
            return plan
        plan = previous if previous is not None else apply_feedback(plan, feedback)
        for s in plan.code_subactions:  # a skill the critic moved to code starts where the reference plan's would
            if is_crafter(task.name) and s.name in skills.SKILLS and not s.initiation:
                s.initiation = skills.initiation_of(s.name)
        return plan


def plan_messages(task: Task, env_doc: str, feedback: Feedback | None = None,
                  previous: Plan | None = None, library: dict[str, str] | None = None) -> list[dict]:
    """The planner's prompt, filled in; `python slow_agent.py --task T` prints it."""
    rule = _subtasks_rule(task)
    if rule in (SUBTASKS_LONG, SUBTASKS_BENCHMARK):
        rule += CURRICULUM.format(bonus=SUBTASK_REWARD, threshold=CU.THRESHOLD, window=CU.WINDOW,
                                  min_episodes=CU.MIN_EPISODES)
    text = PLAN_PROMPT.format(
        task=task.name, description=task.description, chain=" -> ".join(task.prerequisites) or "none",
        api_doc=env_doc, actions=", ".join(task.actions), max_subactions=MAX_SUBACTIONS, subtasks_rule=rule,
        milestones=", ".join(task.milestones) or "none",
        lo=SHAPING_RANGE[0], hi=SHAPING_RANGE[1], items=", ".join(task.items),
        initiation=(INITIATION_VIEW if task.cells else INITIATION_INVENTORY).format(cells=", ".join(task.cells)))
    if library:
        text += LIBRARY_NOTE.format(skills="\n".join(f"- {name}: {line}" for name, line in library.items()))
    if feedback is not None:
        moved = {n: "rl" for n in feedback.to_rl} | {n: "code" for n in feedback.to_code}
        text += REPLAN_PROMPT.format(previous=_plan_text(previous, moved) if previous else "(not kept)",
                                     feedback=json.dumps(feedback.to_dict(), indent=1))
    return [{"role": "system", "content": PLAN_SYSTEM.format(game=game_of(task.name))},
            {"role": "user", "content": text}]


def _subtasks_rule(task: Task) -> str:
    """What the planner is asked for "subtasks": a chain where the curriculum (Crafter only) reads one."""
    if not is_crafter(task.name):
        return SUBTASKS_MINEDOJO
    if task.achievement is None:
        return SUBTASKS_BENCHMARK
    return SUBTASKS_LONG if len(task.prerequisites) >= LONG_CHAIN else SUBTASKS_SHORT


def _without_reuse(schema: dict) -> dict:
    """The plan schema without "reuse", for a run with no skill library: never offer what does not exist."""
    items = schema["properties"]["subactions"]["items"]
    props = {k: v for k, v in items["properties"].items() if k != "reuse"}
    subactions = {**schema["properties"]["subactions"], "items": {**items, "properties": props}}
    return {**schema, "properties": {**schema["properties"], "subactions": subactions}}


def _plan_text(plan: Plan, moved: dict[str, str] | None = None) -> str:
    """A plan as the prompts show it; a sub-action in `moved` (name -> its new "how") shows no spec, since
    that spec was written for the other kind."""
    moved = moved or {}
    lines = [f"sub-tasks: {' -> '.join(plan.subtasks)}"] if plan.subtasks else []
    for s in plan.subactions:
        if s.name in moved:
            was = "code" if moved[s.name] == "rl" else "rl"
            lines.append(f"- {s.name} ({s.how}): {MOVED_NOTE.format(how=s.how, was=was)}")
        else:
            lines.append(f"- {s.name} ({s.how}{', reused from the library' if s.reuse else ''}): {s.spec}")
    lines.append(f"rl_config: {json.dumps(plan.rl_config)}")
    return "\n".join(lines)


class _Recorder:
    """An LLM stand-in for --show-prompt: keeps what would be sent, then fails like a dead endpoint, so the
    agents build their messages exactly as in a run and send nothing."""

    vision = False

    def __init__(self):
        self.sent: list[tuple[list[dict], dict | None]] = []

    def chat(self, messages: list[dict], *, json_schema: dict | None = None, **_):
        self.sent.append((list(messages), json_schema))
        raise LLMError("--show-prompt sends nothing")


def show_prompts(task: Task, doc: str, settings: dict, hand_written: bool = False) -> str:
    """The planner's, the fast agent's (for the reference plan's first code sub-action) and the critic's
    messages for `task`, as an LLM run with these `settings` (train.py's: total_steps, iterations, num_envs,
    num_steps, eval_episodes, max_macro_steps) sends them first: `python train.py --show-prompt`. Where a
    run measures something the critic's read 0 or "not measured" (a run's own numbers are in
    iter_k/stats.json, and every message it sent, with the reply, in llm_transcript.jsonl)."""
    from fast_agent import FastAgent

    rec, out = _Recorder(), []
    plan = Plan.from_dict((skills if is_crafter(task.name) else minedojo_skills).reference_plan(task.name), task)
    sub = plan.code_subactions[0] if plan.code_subactions else None
    first = settings["total_steps"] // settings["iterations"]
    stats = {"task": task.name, "mode": "rlgpt", "iteration": 1, "env_steps": first, "iteration_steps": [0, first],
             "rollout": {"num_envs": settings["num_envs"], "num_steps": settings["num_steps"]},
             "eval_episodes": settings["eval_episodes"], "max_macro_steps": settings["max_macro_steps"],
             "success_episodes": 0, "decisions": 0}
    written = [CodeAction(s.name, "", "") for s in plan.code_subactions]  # what the fast agent would write
    for what, call in [("planner", lambda: SlowAgent(rec).plan(task, doc)),
                       ("fast agent", lambda: sub and FastAgent(rec, dry_run_task=task.name).write(sub, doc)),
                       ("critic", lambda: SlowAgent(rec, hand_written=hand_written).critique(plan, written, stats))]:
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="collect_wood")
    args = parser.parse_args(argv)
    try:
        task = get_task(args.task)
    except ValueError as e:
        parser.error(str(e))
    doc = api_doc(api_for(task.name))
    for m in plan_messages(task, doc):
        print(f"----- {m['role']} -----\n{m['content']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
