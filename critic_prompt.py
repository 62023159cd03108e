"""The LLM critic's prompt: what it reads after an iteration and what it may choose, filled in from the
iteration's statistics (evidence.critic_stats, iter_k/stats.json).

Every number carries what it is computed over and its n, and is defined in the prompt in one line; the
critic is shown the menus it may choose from (the RL config's, and skills.py's hand-written variants only
where the run allows hand-written code). slow_agent.SlowAgent.critique sends it and checks the reply.

    python train.py --task crafter --show-prompt    # these messages, as a run with these settings sends them
"""

from __future__ import annotations

import skills
from core import SHAPING_RANGE, CodeAction, Plan
from critic import active_code, num, success_text
from env import game_of, get_task

CRITIC_SYSTEM = """You are the critic of RL-GPT. After a round of RL training with code actions in the \
game {game}, you read the statistics and explain what went wrong, so the planner can re-plan and the \
code writer can fix its code."""

CRITIC_PROMPT = """Task `{task}`: {description}

The plan that was trained:
{plan}

Iteration {iteration} trained from env step {first_step} to {env_steps} (every primitive step counts, those \
a code action takes included). Every number below is over the {n_train} training episodes that finished in \
this iteration, unless it says "evaluation".
- training success rate: {success_rate}: the share of those episodes in which the task was done (an \
episode ends when it is done){score}
- success per PPO update, oldest first, each over the episodes that finished during one rollout of \
{num_steps} decisions in each of {num_envs} envs: {trend}
- training episode length (env steps): {lengths}
- how the failed training episodes ended (episodes each): {ends}
- where the failed training episodes stalled (share of them that never unlocked each step of the task's \
chain): {stalls}
- evaluation, apart from training: success {eval_success} and mean length {eval_length} env steps over \
{eval_episodes} episodes on unseen worlds, actions sampled from the policy

Code actions, one line each, over this iteration's training ({decisions} decisions of the RL agent):
{code_actions}
What each number there is:
- chosen: how many of the RL agent's decisions called the code action; share: chosen / all its decisions \
(base actions included)
- success: share of its calls that returned True (or in which the task got done)
- primitive steps per call: mean env steps one call took; a call that takes none is charged one noop step
- reward per call: mean over calls of the rewards of the call's env steps, summed, not discounted: the \
task's reward ({reward_rule}) plus the plan's shaping and, under a curriculum, the current sub-task's bonus
- errors: the most common errors or budget overruns ("stopped: ..."), each with its number of calls{frames_note}

What you may change:
- "to_code" / "to_rl": names of rl sub-actions that should become code / code sub-actions better left to RL.
- "fixes": {{code sub-action name: how to fix its code}}. The code writer sees only that sub-action's spec, \
the API doc and your note, never other code: each note must stand alone (name no other code action or \
pattern it has not seen), and any success test it asks for must be observable through the API's return \
values, within one call's {max_macro_steps} env steps.
{variants}- "rl_config": replaces keys of the plan's RL config, only from this menu: "shaping": {{inventory \
item: reward per unit gained, {lo} to {hi}}} with items from {items}; "mask_actions": base actions the RL \
agent never needs, from {actions}.

Reply with JSON: "summary": what went wrong and why, in a few sentences; "to_code"; "to_rl"; "fixes"; \
optionally {optional}"rl_config" (leave it out to keep the plan's); "reasons": one line per decision, \
"<name>: <why>"."""

VARIANTS_MENU = """- "variants": {{code sub-action name: a hand-written version to use instead of its code next \
iteration}}. These were written by the project's engineers (skills.py), not by a model, and exist only \
for these:
{lines}
"""

FRAMES_NOTE = "\n{n} frames from failed episodes are attached, in order."


def critic_messages(plan: Plan, plan_text: str, code_actions: list[CodeAction], stats: dict, hand_written: bool,
                    n_frames: int = 0) -> list[dict]:
    """The critic's prompt, filled in from an iteration's stats (evidence.critic_stats, iter_k/stats.json);
    `plan_text`: the plan as the planner's prompt shows it; `hand_written`: offer skills.py's variants."""
    task = get_task(plan.task)
    steps, rollout = stats.get("iteration_steps") or ["?", stats.get("env_steps", "?")], stats.get("rollout") or {}
    offered = _variant_lines(plan) if hand_written else ""
    text = CRITIC_PROMPT.format(
        task=task.name, description=task.description, plan=plan_text, iteration=stats.get("iteration", "?"),
        first_step=steps[0], env_steps=steps[1], n_train=stats.get("success_episodes", "?"),
        success_rate=success_text(stats), score=_score_text(stats.get("score")),
        num_steps=rollout.get("num_steps", "?"), num_envs=rollout.get("num_envs", "?"),
        trend=", ".join(num(x) for x in stats.get("success_trend", [])) or "not measured",
        lengths=_lengths_text(stats.get("episode_lengths") or {}),
        ends=_counted(stats.get("ends") or {}, "ends"), stalls=_stalls_text(stats.get("stalls") or {}),
        eval_success=num(stats.get("eval_success_rate", 0.0)), eval_length=num(stats.get("eval_mean_length", 0.0)),
        eval_episodes=stats.get("eval_episodes", "?"), decisions=stats.get("decisions", "?"),
        code_actions=_code_action_lines(plan, code_actions, stats),
        reward_rule="1 when the task gets done" if task.achievement else
        "the game's own: +1 for each achievement unlocked the first time in an episode, +-0.1 per health point",
        frames_note=FRAMES_NOTE.format(n=n_frames) if n_frames else "",
        max_macro_steps=stats.get("max_macro_steps", "?"),
        variants=VARIANTS_MENU.format(lines=offered) if offered else "",
        lo=SHAPING_RANGE[0], hi=SHAPING_RANGE[1], items=", ".join(task.items), actions=", ".join(task.actions),
        optional='"variants", ' if offered else "")
    return [{"role": "system", "content": CRITIC_SYSTEM.format(game=game_of(task.name))},
            {"role": "user", "content": text}]


def _score_text(score: dict | None) -> str:
    if not score:
        return ""
    rates = ", ".join(f"{a} {num(p)}" for a, p in sorted(score["achievements"].items(), key=lambda kv: -kv[1]))
    return (f"\n- Crafter score: {num(score['score'])}, standard error {num(score['se'])} (bootstrap over the "
            f"{score['episodes']} episodes). This task has no single goal, so its success rate is always 0 and "
            "the score measures it: exp(mean over the 22 achievements of ln(1 + percentage of episodes that "
            f"unlocked it)) - 1\n- share of the episodes that unlocked each achievement: {rates}")


def _lengths_text(e: dict) -> str:
    if not e.get("episodes"):
        return "not measured (no episode finished)"
    won = (f"; the {e['successes']} successful ones: mean {num(e['success_mean_length'])}"
           + (f", standard deviation {num(e['success_length_sd'])}" if e.get("success_length_sd") is not None else "")
           if e.get("successes") else "; none succeeded")
    return f"mean {num(e['mean_length'])} over all {e['episodes']}{won}"


def _counted(d: dict, key: str) -> str:
    if not d.get("failed_episodes"):
        return "no failed episode"
    return f"of {d['failed_episodes']}: " + ", ".join(f"{end} {n}" for end, n in d[key].items())


def _stalls_text(d: dict) -> str:
    if not d.get("failed_episodes") or not d.get("never_reached"):
        return "not measured (no failed episode, or no chain of prerequisites)"
    return f"of {d['failed_episodes']}: " + ", ".join(f"{a} {num(p)}" for a, p in d["never_reached"].items())


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
        if stats.get("mode") == "rl+config":
            lines.append(f"- {name}: not written (--mode rl+config runs the plan's RL configuration, no code)")
            continue
        if name not in active:
            lines.append(f"- {name}: no code was accepted for it, so it was left to RL")
            continue
        st = per_action.get(active[name].name) or {}  # train.py lists only code actions chosen at least once
        errors = "; ".join(f"{msg!r} x{n}" for msg, n in st.get("errors", [])[:3]) or "none"
        origin = " (hand-written, skills.py)" if active[name].doc.startswith(skills.LABEL) else ""
        lines.append(f"- {name}{origin}: chosen {st.get('chosen', 0)} times, share {num(st.get('share', 0.0))}, "
                     f"success {num(st.get('success_rate', 0.0))}, "
                     f"{num(st.get('mean_steps', 0.0))} primitive steps and reward "
                     f"{num(st.get('mean_reward', 0.0))} per call; errors: {errors}")
    return "\n".join(lines) or "(none)"
