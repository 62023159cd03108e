"""The critic's message: its templates and the reply schema.

slow_agent.critic_messages fills them from an iteration's statistics (evidence.critic_stats,
iter_k/stats.json); slow_agent.SlowAgent.critique sends the message with `feedback_schema`'s schema and checks
the reply (critic.check_feedback). Every number the prompt shows is defined in it in one line, with what it is
computed over; the critic is shown the menus it may choose from (the RL config's, and reference/skills.py's
hand-written variants only where the run allows hand-written code). Map of every message: prompts/__init__.py.

    python train.py --task crafter --show-prompt    # these messages, as a run with these settings sends them
"""

CRITIC_SYSTEM = """You are the critic of RL-GPT. After a round of RL training with code actions in the \
game {game}, you read the statistics and explain what went wrong, so the planner can re-plan and the \
code writer can fix its code."""

CRITIC_PROMPT = """Task `{task}`: {description}
Success test (what every success rate counts): {success}.

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
- what the successful training episodes gathered of each item the task needs (units collected or made per \
successful episode, mean over them, against the units the chain's recipes and the success test need): {gathered}
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

# {score} in CRITIC_PROMPT, for a task with no single goal (`crafter`): evidence.crafter_score's numbers.
SCORE_NOTE = ("\n- Crafter score: {score}, standard error {se} (bootstrap over the {episodes} episodes). This task "
              "has no single goal, so its success rate is always 0 and the score measures it: exp(mean over the 22 "
              "achievements of ln(1 + percentage of episodes that unlocked it)) - 1\n- share of the episodes that "
              "unlocked each achievement: {rates}")

# {reward_rule}: what the task's own reward pays, for a task with a goal and for `crafter`.
REWARD_TASK = "1 when the task gets done"
REWARD_GAME = "the game's own: +1 for each achievement unlocked the first time in an episode, +-0.1 per health point"

# {code_actions}: one line per code sub-action of the plan. ORIGIN marks reference/skills.py's hand-written code.
CODE_ACTION_LINE = ("- {name}{origin}: chosen {chosen} times, share {share}, success {success}, {steps} primitive "
                    "steps and reward {reward} per call; errors: {errors}")
ORIGIN = " (hand-written, skills.py)"
NOT_WRITTEN_LINE = "- {name}: not written (--mode rl+config runs the plan's RL configuration, no code)"
LEFT_TO_RL_LINE = "- {name}: no code was accepted for it, so it was left to RL"

_STR, _STRS = {"type": "string"}, {"type": "array", "items": {"type": "string"}}
# summary, to_code, to_rl and fixes are required; the acting critic's fields are optional, so an LLM reply
# without them still parses (and changes nothing but the moves and fixes)
FEEDBACK_SCHEMA = {"type": "object", "required": ["summary", "to_code", "to_rl", "fixes"], "properties": {
    "summary": _STR, "to_code": _STRS, "to_rl": _STRS,
    "fixes": {"type": "object", "additionalProperties": {"type": "string"}},
    "variants": {"type": "object", "additionalProperties": {"type": "string"}},
    "rl_config": {"type": "object", "properties": {
        "shaping": {"type": "object", "additionalProperties": {"type": "number"}}, "mask_actions": _STRS}},
    "reasons": _STRS}}


def feedback_schema(variants: bool) -> dict:
    """FEEDBACK_SCHEMA, without "variants" where the run uses no hand-written code: nothing offered that
    does not exist."""
    return {**FEEDBACK_SCHEMA, "properties": {k: v for k, v in FEEDBACK_SCHEMA["properties"].items()
                                              if variants or k != "variants"}}
