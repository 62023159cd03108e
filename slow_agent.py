"""The slow agent of RL-GPT: plans which sub-actions are code and which are RL, and criticises results.

The slow loop of the paper: `plan()` splits a task into sub-actions (each marked "code" for the fast
agent to write, or "rl" to be left to PPO) plus a small RL configuration; after training,
`critique()` reads the real statistics of every code action and says what to change; the next
`plan()` gets that feedback with the previous plan. Replies are JSON checked by a schema and then by
`Plan.from_dict`; every rejection goes back to the model with the exact error, a few times at most.

With `llm=None` the agent is the reference backend: the plan is `plans.reference_plan`
(`minedojo_skills.reference_plan` for a MineDojo task) and the critic is the rule-based one of
reference/critic_rules.py. Nothing there is LLM output, and it says so. The critic's Feedback, its checks
and how it changes a plan live in critic.py, for both backends.

What the models read is worded in prompts/ (planner.py, critic.py, the repair note in common.py), with the
reply schemas; `plan_messages` and `critic_messages` here fill it with the task and the run's numbers.

    python slow_agent.py --task collect_diamond      # print the planner's prompt, exactly as sent
    python train.py --task crafter --show-prompt     # the planner's, fast agent's and critic's messages
    python -m reference.plans collect_diamond        # the hand-written reference plan of that task
"""

from __future__ import annotations

import argparse
import json

import curriculum
from core import MAX_SUBACTIONS, SHAPING_RANGE, CodeAction, Mode, Plan, Task, api_doc, initiation_text, success_in_words
from critic import Feedback, active_code, apply_feedback, check_feedback, num, success_text
from env import api_for, game_of, get_task, is_crafter
from envs.crafter_env import SUBTASK_REWARD
from llm import LLMReplyError
from prompts.common import CALL_ENDS, REPAIR_PROMPT, call_ends_text
from prompts.critic import (
    CODE_ACTION_LINE,
    CODE_ROUTINE_LINE,
    CODE_TITLE,
    CODE_TITLE_CODE,
    CRITIC_PROMPT,
    CRITIC_SYSTEM,
    CRITIC_SYSTEM_CODE,
    EVAL_CODE,
    EVAL_RL,
    FRAMES_NOTE,
    LEFT_TO_RL_LINE,
    MOVE_FIXES,
    MOVE_INITIATIONS,
    MOVE_RL_CONFIG,
    MOVE_TO_CODE,
    NOOP_CHARGED,
    NOOP_FREE,
    NOOP_ORDER,
    NOT_WRITTEN_LINE,
    NUMBERS_CODE,
    NUMBERS_RL,
    ORDER_LINE,
    ORIGIN,
    PLAN_TITLE,
    PLAN_TITLE_CODE,
    REWARD_EXTRA_RL,
    REWARD_GAME,
    REWARD_TASK,
    SCORE,
    STATS_GAME,
    STATS_GOAL,
    SUCCESS_CODE,
    SUCCESS_RL,
    UPDATE_CODE,
    UPDATE_RL,
    VARIANTS_MENU,
    feedback_schema,
)
from prompts.planner import (
    CURRICULUM,
    EXAMPLES_INVENTORY,
    EXAMPLES_VIEW,
    INITIATION_INVENTORY,
    INITIATION_VIEW,
    LIBRARY_NOTE,
    MOVED_NOTE,
    OBSERVABLE_INVENTORY,
    OBSERVABLE_VIEW,
    PLAN_PROMPT,
    PLAN_SYSTEM,
    REPLAN_PROMPT,
    SUBTASKS_BENCHMARK,
    SUBTASKS_LONG,
    SUBTASKS_MINEDOJO,
    SUBTASKS_SHORT,
    SUBTASKS_TEST,
    plan_schema,
)
from reference import minedojo_skills, plans, skills
from reference.critic_rules import rule_based_critique

# The replies' caps (max_tokens, as sent), so that a full plan or critique is never cut. Measured in characters
# and counted at 3.5 characters a token (JSON with English text; no tokenizer here): the longest plan the tests
# script, reference/plans.py's collect_diamond (16 sub-actions, specs up to 217 characters), is 8,736 characters
# compact and 10,330 indented (2,950 tokens: past the old cap of 2048); a capable model's 16-sub-action `crafter`
# plan was 7,237 (2,070 tokens, specs up to 413 characters) and its two critiques 1,901 and 1,708 (fixes of up
# to 561 characters for 2 and 3 code actions). A full plan, 16 sub-actions each with a 600-character spec, a
# 250-character reason and an initiation, indented, is 19,748 characters: 5,640 tokens (6,580 even at 3 a token).
# A full critique (an 800-character summary, fixes of 500 characters for 16 code actions, 22 reasons) is 13,296:
# 3,800 (4,430).
# tests/test_agents.py builds both and checks they fit; a reply cut anyway goes back to the model (CUT_OFF).
PLAN_REPLY_TOKENS = 8192
CRITIQUE_REPLY_TOKENS = 6144


class AgentError(Exception):
    """The model kept replying with something unusable after every repair (or a hand-written reference
    plan is invalid); the message says what."""


# ----------------------------------------------------------------------------------------------
# The agent.

class SlowAgent:
    """Planner and critic. `llm` is an LLMClient/ReplayClient, or None for the reference backend (no LLM)."""

    def __init__(self, llm=None, *, max_repairs: int = 2, hand_written: bool | None = None):
        self.llm, self.max_repairs = llm, max_repairs
        # whether the critic may choose reference/skills.py's hand-written variants: always without an LLM, in an LLM
        # run only when its user asked (train.py --hand-written)
        self.hand_written = llm is None if hand_written is None else hand_written
        self.catalogue: dict[str, str] = {}  # skill library: name -> one line; train.py fills it before plan()
        self.last_rejections: list[str] = []  # why each reply of the last plan()/critique() was rejected

    def plan(self, task: Task, env_doc: str, feedback: Feedback | None = None,
             previous: Plan | None = None) -> Plan:
        """A validated plan; from the second iteration on, `feedback` and `previous` revise it. Both backends
        start a revision from the same place: the previous plan with the critic's decisions applied."""
        if feedback is not None and previous is not None:
            previous = apply_feedback(previous, feedback)
        if self.llm is None:
            return self._reference_plan(task, feedback, previous)

        def parse(data: dict) -> Plan:
            plan = Plan.from_dict({**data, "task": task.name}, task)
            if _subtasks_rule(task) == SUBTASKS_LONG and not plan.subtasks:
                raise ValueError(f"`{task.name}` has a long prerequisite chain: list the chain of "
                                 "sub-tasks in \"subtasks\" first")
            unknown = [s.name for s in plan.subactions if s.reuse and s.name not in self.catalogue]
            if unknown:
                raise ValueError(f"{unknown} say \"reuse\": true but are not in the skill library; reuse only "
                                 f"{sorted(self.catalogue) or 'nothing (this run has no skill library)'}, or leave "
                                 "reuse out (a code sub-action that keeps its name keeps its accepted code)")
            return plan

        messages = plan_messages(task, env_doc, feedback, previous, self.catalogue)
        return self._ask(messages, plan_schema(reuse=bool(self.catalogue), view=bool(task.cells)), parse, "plan",
                         max_tokens=PLAN_REPLY_TOKENS)

    def critique(self, plan: Plan, code_actions: list[CodeAction], stats: dict,
                 frames: list[bytes] | None = None) -> Feedback:
        """What went wrong in the last RL round; frames are only sent to a vision-capable model."""
        if self.llm is None:
            return check_feedback(rule_based_critique(plan, code_actions, stats), plan, skills.variants)
        frames = list(frames or []) if getattr(self.llm, "vision", False) else []

        rl = stats.get("mode") != Mode.CODE  # --mode code: no RL moves exist
        variants = skills.variants if self.hand_written else None  # an LLM run may name none unless asked

        def parse(data: dict) -> Feedback:  # the same checks as the rule-based critic's feedback gets
            return check_feedback(Feedback.from_dict(data), plan, variants, rl=rl)

        messages = critic_messages(plan, code_actions, stats, self.hand_written, len(frames))
        view = bool(get_task(plan.task).cells)  # an initiation can test the view only where the API has one
        return self._ask(messages, feedback_schema(variants=self.hand_written, rl=rl, view=view), parse, "critique",
                         images=frames or None, max_tokens=CRITIQUE_REPLY_TOKENS)

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

    def _reference_plan(self, task: Task, feedback: Feedback | None, previous: Plan | None) -> Plan:
        """The hand-written reference plan; a re-plan is the previous plan with the critic's decisions applied."""
        try:
            reference = (plans if is_crafter(task.name) else minedojo_skills).reference_plan(task.name)
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


# ----------------------------------------------------------------------------------------------
# The messages: prompts/ filled in with the task and the run's numbers.

def plan_messages(task: Task, env_doc: str, feedback: Feedback | None = None,
                  previous: Plan | None = None, catalogue: dict[str, str] | None = None) -> list[dict]:
    """The planner's messages (prompts/planner.py), filled in; `python slow_agent.py --task T` prints them."""
    rule = _subtasks_rule(task)
    if rule in (SUBTASKS_LONG, SUBTASKS_BENCHMARK):
        rule += CURRICULUM.format(bonus=SUBTASK_REWARD, threshold=curriculum.THRESHOLD, window=curriculum.WINDOW,
                                  min_episodes=curriculum.MIN_EPISODES)
    text = PLAN_PROMPT.format(
        task=task.name, description=task.description, chain=" -> ".join(task.prerequisites) or "none",
        success=success_in_words(task.success),
        api_doc=env_doc, actions=", ".join(task.actions), max_subactions=MAX_SUBACTIONS, subtasks_rule=rule,
        milestones=", ".join(task.milestones) or "none",
        lo=SHAPING_RANGE[0], hi=SHAPING_RANGE[1], items=", ".join(task.items),
        initiation=(INITIATION_VIEW if task.cells else INITIATION_INVENTORY).format(cells=", ".join(task.cells)),
        initiation_examples=EXAMPLES_VIEW if task.cells else EXAMPLES_INVENTORY,
        observable=OBSERVABLE_VIEW if task.cells else OBSERVABLE_INVENTORY)
    if catalogue:
        text += LIBRARY_NOTE.format(skills="\n".join(f"- {name}: {line}" for name, line in catalogue.items()))
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
    if not task.success:
        return SUBTASKS_BENCHMARK
    if len(task.prerequisites) < plans.LONG_CHAIN:
        return SUBTASKS_SHORT
    return SUBTASKS_LONG if task.achievement else SUBTASKS_TEST


def _plan_text(plan: Plan, moved: dict[str, str] | None = None, rl: bool = True) -> str:
    """A plan as the planner's re-plan and the critic read it; a sub-action in `moved` (name -> its new "how")
    shows no spec, since that spec was written for the other kind; without RL (`rl` False) no RL config."""
    moved = moved or {}
    lines = [f"sub-tasks: {' -> '.join(plan.subtasks)}"] if plan.subtasks else []
    for s in plan.subactions:
        if s.name in moved:
            was = "code" if moved[s.name] == "rl" else "rl"
            lines.append(f"- {s.name} ({s.how}): {MOVED_NOTE.format(how=s.how, was=was)}")
        else:
            starts = f" It may start only when: {initiation_text(s.initiation)}." if s.initiation else ""
            lines.append(f"- {s.name} ({s.how}{', reused from the library' if s.reuse else ''}): {s.spec}{starts}")
    lines += [f"rl_config: {json.dumps(plan.rl_config)}"] if rl else []
    return "\n".join(lines)


def _statistics_text(task: Task, stats: dict, rl: bool, rollout: dict) -> str:
    """The critic's statistics: a task with a goal is read by its success (STATS_GOAL); crafter's whole game,
    where no episode succeeds, by its Crafter score and each achievement's unlock share (STATS_GAME)."""
    shared = {"lengths": _lengths_text(stats.get("episode_lengths") or {}, bool(task.success)),
              "ends": _counted(stats.get("ends") or {}, "ends", bool(task.success)),
              "eval_length": num(stats.get("eval_mean_length", 0.0)),
              "eval_episodes": stats.get("eval_episodes", "?"), "eval_policy": EVAL_RL if rl else EVAL_CODE}
    if not task.success:
        by_share = sorted(((stats.get("score") or {}).get("achievements") or {}).items(), key=lambda kv: -kv[1])
        return STATS_GAME.format(score=_score_text(stats.get("score")), eval_score=_score_text(stats.get("eval_score")),
                                 rates=", ".join(f"{a} {num(p)}" for a, p in by_share) or "not measured", **shared)
    update, decision_word = UPDATE_RL if rl else UPDATE_CODE
    return STATS_GOAL.format(
        success_rate=success_text(stats), update=update, decision_word=decision_word,
        num_steps=rollout.get("num_steps", "?"), num_envs=rollout.get("num_envs", "?"),
        trend=", ".join(num(x) for x in stats.get("success_trend", [])) or "not measured",
        stalls=_stalls_text(stats.get("stalls") or {}), gathered=_gathered_text(stats.get("gathered") or {}),
        eval_success=num(stats.get("eval_success_rate", 0.0)), **shared)


def critic_messages(plan: Plan, code_actions: list[CodeAction], stats: dict, hand_written: bool,
                    n_frames: int = 0) -> list[dict]:
    """The critic's messages (prompts/critic.py), filled in from an iteration's stats (evidence.critic_stats,
    iter_k/stats.json); `hand_written`: offer reference/skills.py's variants; `n_frames`: frames attached.
    Under --mode code (stats["mode"]) no RL runs: the critic reads about the one routine and may only fix it."""
    task, rl = get_task(plan.task), stats.get("mode") != Mode.CODE
    steps, rollout = stats.get("iteration_steps") or ["?", stats.get("env_steps", "?")], stats.get("rollout") or {}
    offered = _variant_lines(plan) if hand_written else ""
    what = "code sub-action" if rl else "routine"
    moves = [MOVE_TO_CODE] if rl else []
    moves.append(MOVE_FIXES.format(what=what, seen="that sub-action's spec," if rl else "the routine's request,",
                                   max_macro_steps=stats.get("max_macro_steps", "?")))
    moves += [VARIANTS_MENU.format(what=what, lines=offered).rstrip()] if offered else []
    if rl:
        menu = INITIATION_VIEW if task.cells else INITIATION_INVENTORY
        moves += [MOVE_INITIATIONS.format(initiation=menu.format(cells=", ".join(task.cells))),
                  MOVE_RL_CONFIG.format(lo=SHAPING_RANGE[0], hi=SHAPING_RANGE[1], items=", ".join(task.items),
                                        actions=", ".join(task.actions))]
    optional = [f'"{k}"' for k in ("variants", *(("initiations", "rl_config") if rl else ()))
                if k != "variants" or offered]
    statistics = _statistics_text(task, stats, rl, rollout)
    text = CRITIC_PROMPT.format(
        task=task.name, description=task.description, plan_title=PLAN_TITLE if rl else PLAN_TITLE_CODE,
        plan=_plan_text(plan, rl=rl), iteration=stats.get("iteration", "?"),
        first_step=steps[0], env_steps=steps[1], n_train=stats.get("success_episodes", "?"), statistics=statistics,
        code_title=(CODE_TITLE if rl else CODE_TITLE_CODE).format(decisions=stats.get("decisions", "?")),
        code_actions=_code_action_lines(plan, code_actions, stats), numbers=NUMBERS_RL if rl else NUMBERS_CODE,
        success_rule=SUCCESS_RL if rl else SUCCESS_CODE, reward_rule=REWARD_TASK if task.success else REWARD_GAME,
        success=success_in_words(task.success),
        reward_extra=REWARD_EXTRA_RL if rl else "", call_ends="; ".join(f'"{w}"' for w in CALL_ENDS.values()),
        frames_note=FRAMES_NOTE.format(n=n_frames) if n_frames else "", moves="\n".join(moves),
        noop_rule=NOOP_CHARGED if not rl else NOOP_FREE + (NOOP_ORDER if plan.rl_config.get("follow_order") else ""),
        required='"to_code"; "to_rl"; "fixes"' if rl else '"fixes"',
        optional=f"optionally {', '.join(optional)} (each left out keeps what it is); " if optional else "")
    system = CRITIC_SYSTEM if rl else CRITIC_SYSTEM_CODE
    return [{"role": "system", "content": system.format(game=game_of(task.name))},
            {"role": "user", "content": text}]


def _score_text(score: dict | None) -> str:
    """A Crafter score (evidence.crafter_score) with its standard error and n; 'not measured' without episodes."""
    if not score:
        return "not measured (no episode finished)"
    return SCORE.format(score=num(score["score"]), se=num(score["se"]), episodes=score["episodes"])


def _lengths_text(e: dict, goal: bool = True) -> str:
    """Episode lengths over all finished episodes and, for a task with a goal, over the successful ones; each
    with its n."""
    if not e.get("episodes"):
        return "not measured (no episode finished)"
    won = (f"; the {e['successes']} successful ones: mean {num(e['success_mean_length'])}"
           + (f", standard deviation {num(e['success_length_sd'])}" if e.get("success_length_sd") is not None else "")
           if e.get("successes") else "; none succeeded")
    return f"mean {num(e['mean_length'])} over all {e['episodes']}{won if goal else ''}"


def _counted(d: dict, key: str, goal: bool = True) -> str:
    """How many failed episodes (with no goal: all episodes) fall under each entry of `d[key]`, out of how many."""
    if not d.get("failed_episodes"):
        return "no failed episode" if goal else "not measured (no episode finished)"
    return f"of {d['failed_episodes']}: " + ", ".join(f"{end} {n}" for end, n in d[key].items())


def _stalls_text(d: dict) -> str:
    """The share of failed episodes that never reached each step of the task's chain."""
    if not d.get("failed_episodes") or not d.get("never_reached"):
        return "not measured (no failed episode, or no chain of prerequisites)"
    return f"of {d['failed_episodes']}: " + ", ".join(f"{a} {num(p)}" for a, p in d["never_reached"].items())


def _gathered_text(d: dict) -> str:
    """Units of each chain item per successful episode (evidence.gathered), with n and the chain's need."""
    if not d.get("items"):
        return "not measured (no successful episode, or no chain of recipes)"
    return f"over {d['successes']} successful episodes: " + ", ".join(
        f"{item} {num(g['mean'])} (needs {g['uses']})" for item, g in d["items"].items())


def _variant_lines(plan: Plan) -> str:
    """Each code sub-action with hand-written alternatives, and what each variant does (its docstring)."""
    lines = []
    for s in plan.code_subactions:
        versions = skills.variants(s.name)
        if len(versions) > 1:
            lines.append(f"  {s.name}: " + "; ".join(f'"{v}": {a.doc.removeprefix(skills.LABEL)}'
                                                        for v, a in versions.items()))
    return "\n".join(lines)


def _code_action_lines(plan: Plan, code_actions: list[CodeAction], stats: dict) -> str:
    """One line per code sub-action with its real statistics; rejected code is said to have run as RL."""
    active, per_action = active_code(plan, code_actions), stats.get("code_actions", {})
    lines = []
    for name in [s.name for s in plan.code_subactions]:
        if stats.get("mode") == Mode.RL_CONFIG:
            lines.append(NOT_WRITTEN_LINE.format(name=name))
            continue
        if name not in active:
            lines.append(LEFT_TO_RL_LINE.format(name=name))
            continue
        st = per_action.get(active[name].name) or {}  # train.py lists only code actions chosen at least once
        errors = "; ".join(f"{msg!r} x{n}" for msg, n in st.get("errors", [])[:3]) or "none"
        line = CODE_ACTION_LINE if stats.get("mode") != Mode.CODE else CODE_ROUTINE_LINE
        lines.append(line.format(
            name=name, origin=ORIGIN if active[name].doc.startswith(skills.LABEL) else "",
            chosen=st.get("chosen", 0), share=num(st.get("share", 0.0)), success=num(st.get("success_rate", 0.0)),
            steps=num(st.get("mean_steps", 0.0)), reward=num(st.get("mean_reward", 0.0)), errors=errors,
            ends=call_ends_text(st.get("ends") or {})))
    if order := stats.get("order"):  # under follow_order: how closely the RL agent kept to it
        lines.append(ORDER_LINE.format(named=order["named"], decisions=stats.get("decisions", "?"),
                                       followed=order["followed"], share=num(order["share"]),
                                       first=num(order["teacher_coef"][0]), last=num(order["teacher_coef"][1])))
    return "\n".join(lines) or "(none)"


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
