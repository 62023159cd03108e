"""The critic of RL-GPT's slow loop: what the last round of training says to change, and whether a
change is kept.

`Feedback` is the critic's decision. It comes from an LLM (its prompt and reply schema in prompts/critic.py)
or from `reference/critic_rules.rule_based_critique`, the reference backend's critic (hand-written rules,
labelled as such). Both go
through the same steps: `Feedback.from_dict` (also how a run directory stores it), `check_feedback`
(names and variants against the plan) and `apply_feedback` (the new Plan). Changes to code (a
variant to swap in, a fix for the code writer) stay in the Feedback: they are not part of a Plan.

`keep_change` is the rollback rule: a change is kept only if the next iteration is not worse (by its
success, its Crafter score where the task has no goal, or how long success takes once it is saturated).
What the rules read about the episodes is computed in evidence.py.

    python critic.py    # nothing to run: the slow agent (slow_agent.py) calls this; see tests/test_critic.py
                        # (the rule-based critic, the rollback rule) and tests/test_critic_llm.py (an LLM's)
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field

from core import CodeAction, Plan
from env import get_task
from run_state import LoopState


@dataclass
class Feedback:
    summary: str  # what went wrong and why
    to_code: list[str]  # rl sub-actions that should become code
    to_rl: list[str]  # code sub-actions better left to RL
    fixes: dict[str, str]  # code sub-action name -> how to fix its code (given to the fast agent)
    variants: dict[str, str] = field(default_factory=dict)  # code sub-action -> hand-written variant to use
    rl_config: dict | None = None  # keys of the RL config to replace (shaping, mask_actions); None: keep it
    reasons: list[str] = field(default_factory=list)  # one line per decision, "<what>: <why>", for the log
    initiations: dict[str, dict] = field(default_factory=dict)  # code sub-action -> its new initiation condition

    def to_dict(self) -> dict:
        """As JSON stores and the planner reads it: an rl_config left out stays out (null is off the schema), and
        so do initiations when there are none (as feedback stored before they existed reads)."""
        d = asdict(self)
        if d["rl_config"] is None:
            del d["rl_config"]
        if not d["initiations"]:
            del d["initiations"]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Feedback:
        rl = d.get("rl_config")
        return cls(str(d.get("summary", "")), list(d.get("to_code", [])), list(d.get("to_rl", [])),
                   dict(d.get("fixes", {})), dict(d.get("variants") or {}), dict(rl) if rl else None,
                   [str(r) for r in d.get("reasons") or []], dict(d.get("initiations") or {}))


def check_feedback(feedback: Feedback, plan: Plan, variants: Callable[[str], Collection[str]] | None = None,
                   rl: bool = True) -> Feedback:
    """The feedback with every name read as the plan's sub-action (a code version such as chop_tree_v2
    names chop_tree); ValueError, worded for the model to fix, if it names what the plan lacks, moves a
    sub-action both ways, asks for a variant that `variants` (sub-action name -> its hand-written variants'
    names, reference.skills.variants) does not list (or any, where it is None: an LLM run uses no hand-written
    code unless its user asked), an RL move where no RL runs (`rl` False: --mode code), or an initiation or RL
    config off the menu."""
    names = {s.name for s in plan.subactions}
    fb = feedback
    used = [k for k, v in (("to_code", fb.to_code), ("to_rl", fb.to_rl), ("initiations", fb.initiations),
                           ("rl_config", fb.rl_config)) if v]
    if used and not rl:
        raise ValueError(f"{used}: no RL runs in this mode, so only \"fixes\" can change the routine; leave "
                         f"{', '.join(used)} out")
    if fb.variants and variants is None:
        raise ValueError(f"variants {fb.variants}: this run uses no hand-written code, so there are no variants "
                         "to choose; leave \"variants\" out and say in \"fixes\" how to change the code")
    unknown = sorted(n for n in {*fb.to_code, *fb.to_rl, *fb.fixes, *fb.variants, *fb.initiations}
                     if _sub_of(n, names) is None)
    if unknown:
        raise ValueError(f"unknown sub-action names {unknown}; the plan has {sorted(names)}")
    fb = dataclasses.replace(fb, to_code=[_sub_of(n, names) for n in fb.to_code],
                             to_rl=[_sub_of(n, names) for n in fb.to_rl],
                             fixes={_sub_of(n, names): text for n, text in fb.fixes.items()},
                             variants={_sub_of(n, names): v for n, v in fb.variants.items()},
                             initiations={_sub_of(n, names): dict(i) if isinstance(i, dict) else i
                                          for n, i in fb.initiations.items()})
    both = sorted(set(fb.to_code) & set(fb.to_rl))
    if both:
        raise ValueError(f"{both} are in both to_code and to_rl")
    bad = [f"{n} has no variant {v!r} (it has {sorted(variants(n)) or 'none'})"
           for n, v in fb.variants.items() if v not in variants(n)]
    if bad:
        raise ValueError("variants: " + "; ".join(bad))
    bad = [n for n, i in fb.initiations.items() if not isinstance(i, dict)]
    if bad:
        raise ValueError(f"initiations of {bad} must be objects (an initiation condition each)")
    apply_feedback(plan, fb)  # an initiation or RL config off the menu raises ValueError here
    return fb


def apply_feedback(plan: Plan, feedback: Feedback) -> Plan:
    """A new, validated Plan with the feedback's moves between code and RL, its initiations (each replaces
    its sub-action's) and its RL config; a moved sub-action's reason becomes the critic's reason for it. The
    plan given is left as it was."""
    new = copy.deepcopy(plan)
    for s in new.subactions:
        how = "code" if s.name in feedback.to_code else "rl" if s.name in feedback.to_rl else s.how
        if how != s.how:
            s.how, s.reuse = how, False  # a reused skill is code by definition
            s.initiation = {} if how == "rl" else s.initiation  # only code has an initiation
            s.reason = next((r for r in feedback.reasons if r.startswith(f"{s.name}:")),
                            f"{s.name}: moved to {how} by the critic")
        if s.name in feedback.initiations:  # after the move: one moved to RL with an initiation is refused
            s.initiation = copy.deepcopy(feedback.initiations[s.name])
    if feedback.rl_config is not None:
        new.rl_config = {**new.rl_config, **copy.deepcopy(feedback.rl_config)}
    return Plan.from_dict(new.to_dict(), get_task(plan.task))  # checked against its game: RL menu, milestones


# ----------------------------------------------------------------------------------------------
# The rollback rule.

# A difference counts as "worse" only beyond this many standard errors of the difference. One standard
# error: an unchanged plan is wrongly rolled back in about 16% of iterations, while a harmful change that
# costs more than the noise is caught; with the few iterations a run has, keeping a bad change for good
# costs more than trying a good one again later.
ROLLBACK_Z = 1.0
# Fewer finished episodes than this on either side and a rule measures nothing: a rate over a handful of
# episodes moves by a third on one episode, and the normal approximation behind ROLLBACK_Z fails there.
ROLLBACK_MIN_EPISODES = 20
# Success at least this high on both sides is saturated: a change can hardly raise it, so what it can
# still make worse is how long success takes (the efficiency rule).
SATURATED = 0.9


def keep_change(previous: dict, current: dict) -> tuple[bool, str]:
    """Keep this iteration's change unless it made things worse than the iteration before it. Each side is
    an iteration's history row (iteration_record.record_iteration: train_success, train_episodes, episode_lengths,
    score), all over that iteration's own training episodes. The first rule that applies decides, and the
    reason names it:
    - Crafter-score rule, for a task with no single goal (`crafter`, where success is always 0): worse if
      the score is lower by more than ROLLBACK_Z standard errors of the difference (each side's bootstrap
      standard error, evidence.crafter_score, combined as independent samples);
    - success rule: worse if the success rate is lower by more than ROLLBACK_Z pooled binomial standard
      errors; better if higher by as much;
    - efficiency rule, when success is within the noise and saturated (>= SATURATED on both sides): worse
      if successful episodes take longer on average by more than ROLLBACK_Z standard errors of the
      difference of the two means.
    A side with fewer than ROLLBACK_MIN_EPISODES episodes (successful ones for the efficiency rule) measures
    nothing: the change is kept, and the reason says so."""
    n0, n1 = previous.get("train_episodes", 0), current.get("train_episodes", 0)
    too_few = (f"kept: too few finished episodes to tell (n={n0} and n={n1}; a rollback needs "
               f"{ROLLBACK_MIN_EPISODES} on each side)")
    if min(n0, n1) < ROLLBACK_MIN_EPISODES:
        return True, too_few
    c0, c1 = previous.get("score"), current.get("score")
    if c0 and c1:
        margin = ROLLBACK_Z * math.hypot(c0["se"], c1["se"])
        shown = (f"Crafter score of the training episodes {num(c1['score'])} (n={c1['episodes']}) against "
                 f"{num(c0['score'])} (n={c0['episodes']}), noise margin {num(margin)}")
        worse = c0["score"] - c1["score"] > margin
        return not worse, f"{'rolled back' if worse else 'kept'} by the Crafter-score rule: {shown}: " \
                          f"{'worse' if worse else 'not worse'}"
    p0, p1 = previous.get("train_success"), current.get("train_success")
    if p0 is None or p1 is None:
        return True, too_few
    pooled = (p0 * n0 + p1 * n1) / (n0 + n1)
    margin = ROLLBACK_Z * math.sqrt(pooled * (1 - pooled) * (1 / n0 + 1 / n1))
    shown = f"training success {p1:.3f} (n={n1}) against {p0:.3f} (n={n0}), noise margin {margin:.3f}"
    if p0 - p1 > margin:
        return False, f"rolled back by the success rule: {shown}: worse"
    if p1 - p0 > margin or min(p0, p1) < SATURATED:
        return True, f"kept by the success rule: {shown}: {'better' if p1 - p0 > margin else 'not worse'}"
    e0, e1 = previous.get("episode_lengths") or {}, current.get("episode_lengths") or {}
    k0, k1 = e0.get("successes", 0), e1.get("successes", 0)
    if min(k0, k1) < ROLLBACK_MIN_EPISODES or e0.get("success_length_se") is None \
            or e1.get("success_length_se") is None:
        return True, (f"kept by the success rule: {shown}: not worse (success is saturated, but too few "
                      f"successful episodes, n={k0} and n={k1}, to judge their length)")
    l0, l1 = e0["success_mean_length"], e1["success_mean_length"]
    margin_l = ROLLBACK_Z * math.hypot(e0["success_length_se"], e1["success_length_se"])
    slower = l1 - l0 > margin_l
    return not slower, (f"{'rolled back' if slower else 'kept'} by the efficiency rule: {shown}, saturated "
                        f"(>= {SATURATED} both sides); successful training episodes took {num(l1)} env steps "
                        f"on average (n={k1}) against {num(l0)} (n={k0}), noise margin {num(margin_l)}: "
                        f"{'slower' if slower else 'not slower'}")


def rollback_if_worse(state: LoopState, action_set) -> str | None:
    """After an iteration that ran with a change the critic made (state.before_change, set by the plan
    phase): keep it unless it made things worse (keep_change); a rolled-back change restores the plan and
    the code actions in use before it, and the next iteration trains that plan again without a re-plan.
    Returns the decision with its reason, or None when the iteration changed nothing."""
    before, history, state.before_change = state.before_change, state.history, None
    if before is None or len(history) < 2:
        return None
    keep, why = keep_change(history[-2], history[-1])
    history[-1]["change"] = why
    if not keep:
        state.plan, action_set.active, state.rolled_back = before["plan"], dict(before["active"]), True
        state.feedback = None  # what asked for the change is spent: nothing of it is applied again
    return why


def success_text(stats: dict) -> str:
    """A success rate always with the number of finished episodes it is over (train.py's stats.json)."""
    rate, n = stats.get("success_rate"), stats.get("success_episodes")
    if rate is None:
        return "not measured (no episode finished)"
    return num(rate) + (f" (n={n} finished episodes)" if n is not None else "")


def num(x) -> str:
    """Numbers as the critic reads them: short, and the same digits a test or a log shows."""
    return str(round(float(x), 3))


def _sub_of(action_name: str, names: set[str]) -> str | None:
    """The sub-action a code action serves: train.py names rewritten code `<sub>_v2`, `<sub>_v3`, ..."""
    m = re.fullmatch(r"(.+)_v\d+", action_name)
    return action_name if action_name in names else m.group(1) if m and m.group(1) in names else None


def active_code(plan: Plan, code_actions: list[CodeAction]) -> dict[str, CodeAction]:
    """Code sub-action name -> the code action now serving it."""
    names = {s.name for s in plan.code_subactions}
    return {_sub_of(a.name, names): a for a in code_actions if _sub_of(a.name, names)}
