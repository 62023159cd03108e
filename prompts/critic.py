"""The critic's message: its templates and the reply schema.

slow_agent.critic_messages fills them from an iteration's statistics (evidence.critic_stats,
iter_k/stats.json); slow_agent.SlowAgent.critique sends the message with `feedback_schema`'s schema and checks
the reply (critic.check_feedback). Every number the prompt shows is defined in it in one line, with what it is
computed over; the critic is shown the menus it may choose from (the RL config's, and reference/skills.py's
hand-written variants only where the run allows hand-written code). Map of every message: prompts/__init__.py.

    python train.py --task crafter --show-prompt    # these messages, as a run with these settings sends them
"""

from prompts.planner import INITIATION_SCHEMA, INITIATION_SCHEMA_NO_VIEW

CRITIC_SYSTEM = """You are the critic of RL-GPT. After a round of RL training with code actions in the \
game {game}, you read the statistics and explain what went wrong, so the planner can re-plan and the \
code writer can fix its code."""
CRITIC_SYSTEM_CODE = """You are the critic of a code-as-policy agent in the game {game}: one routine, written \
by a code writer, plays the whole task with no reinforcement learning. After a round of play you read the \
statistics and explain what went wrong, so the code writer can fix the routine."""

CRITIC_PROMPT = """Task `{task}`: {description}
Success test (what every success rate counts): {success}.

{plan_title}
{plan}

Iteration {iteration} ran from env step {first_step} to {env_steps} (every primitive step counts, those \
a code action takes included). Every number below is over the {n_train} training episodes that finished in \
this iteration, unless it says "evaluation".
{statistics}

{code_title}
{code_actions}
What each number there is:
{numbers}
- success: share of its calls that {success_rule}
- primitive steps per call: mean env steps one call took; {noop_rule}
- reward per call: mean over calls of the rewards of the call's env steps, summed, not discounted: the \
task's reward ({reward_rule}){reward_extra}
- calls ended: its calls counted by how each ended, from these: {call_ends}. A call "stopped by the \
episode's end" did not fail; one that returned without True before any step could not start its job in \
that state
- errors: the most common errors or budget overruns ("stopped: ..."), each with its number of calls{frames_note}

What you may change:
{moves}

Reply with JSON: "summary": what went wrong and why, in a few sentences; {required}; \
{optional}"reasons": one line per decision, "<name>: <why>"."""

# The parts of CRITIC_PROMPT that depend on the mode: RL-GPT and rl+config (the RL agent chooses among
# actions) or --mode code (one whole-task routine, called again and again, no RL).
PLAN_TITLE = "The plan that was trained:"
PLAN_TITLE_CODE = "The whole-task routine's request (what its code writer was asked to write):"
CODE_TITLE = "Code actions, one line each, over this iteration's training ({decisions} decisions of the RL agent):"
CODE_TITLE_CODE = ("The whole-task routine over this iteration's training (no RL runs in this mode: every decision "
                   "calls the routine, each call starting where the last one stopped, until the episode ends; "
                   "{decisions} calls):")
NUMBERS_RL = ("- chosen: how many of the RL agent's decisions called the code action; share: chosen / all its "
              "decisions (base actions included)")
NUMBERS_CODE = "- calls: how many times the routine was called"
SUCCESS_RL = "returned True (or in which the task got done)"
SUCCESS_CODE = ("returned True, which its request defines as having made progress towards the task (or in which "
                "the task got done)")
REWARD_EXTRA_RL = " plus the plan's shaping and, under a curriculum, the current sub-task's bonus"
EVAL_RL, EVAL_CODE = "actions sampled from the policy", "the routine alone"
UPDATE_RL, UPDATE_CODE = ("PPO update", "decisions"), ("stretch of calls", "calls")

MOVE_TO_CODE = ('- "to_code" / "to_rl": names of rl sub-actions that should become code / code sub-actions better '
                "left to RL.")
MOVE_FIXES = """- "fixes": {{{what} name: how to fix its code}}. The code writer sees only {seen} the API doc and your \
note, never other code: each note must stand alone (name no other code action or pattern it has not seen), \
and any success test it asks for must be observable through the API's return values, within one call's \
{max_macro_steps} env steps."""
MOVE_INITIATIONS = """- "initiations": {{code sub-action name: its new initiation condition, replacing the \
one the plan shows after "It may start only when"}}; also for an rl sub-action you move to code, to start \
with. The RL agent may choose a code action only in states where its initiation holds (checked before each \
decision), so a condition that its calls certainly need saves the decisions and steps spent on calls that \
cannot do their job; never one that hides a state where it could succeed. An initiation: {initiation}. A \
change here is measured like the other moves: it is kept only if the next iteration is not worse."""
MOVE_RL_CONFIG = """- "rl_config": replaces keys of the plan's RL config, only from this menu: "shaping": \
{{inventory item: reward per unit gained, {lo} to {hi}}} with items from {items}; "mask_actions": base actions \
the RL agent never needs, from {actions}."""

VARIANTS_MENU = """- "variants": {{{what} name: a hand-written version to use instead of its code next \
iteration}}. These were written by the project's engineers (skills.py), not by a model, and exist only \
for these:
{lines}
"""

FRAMES_NOTE = "\n{n} frames from failed episodes are attached, in order."

# {statistics} in CRITIC_PROMPT, for a task with a success test:
STATS_GOAL = """- training success rate: {success_rate}: the share of those episodes in which the task was done (an \
episode ends when it is done)
- success per {update}, oldest first, each over the episodes that finished during one rollout of \
{num_steps} {decision_word} in each of {num_envs} envs: {trend}
- training episode length (env steps): {lengths}
- how the failed training episodes ended (episodes each): {ends}
- where the failed training episodes stalled (share of them that never unlocked each step of the task's \
chain): {stalls}
- what the successful training episodes gathered of each item the task needs (units collected or made per \
successful episode, mean over them, against the units the chain's recipes and the success test need): {gathered}
- evaluation, apart from training: success {eval_success} and mean length {eval_length} env steps over \
{eval_episodes} episodes on unseen worlds, {eval_policy}"""
# ... and for a task with no single goal (`crafter`): no episode succeeds, so what counts or reads successes is
# left out and the Crafter score (evidence.crafter_score) stands where the success rate would.
STATS_GAME = """- Crafter score: {score}. This task has no single goal, so no episode succeeds and no success \
rate is shown; the score is exp(mean over the 22 achievements of ln(1 + percentage of episodes that unlocked it)) - 1
- share of the episodes that unlocked each achievement: {rates}
- training episode length (env steps): {lengths}
- how the training episodes ended (episodes each: none ends by success, so each ends in one of these): {ends}
- evaluation, apart from training: Crafter score {eval_score} and mean length {eval_length} env steps over \
{eval_episodes} episodes on unseen worlds, {eval_policy}"""
SCORE = "{score}, standard error {se} (bootstrap over the {episodes} episodes)"

# {reward_rule}: what the task's own reward pays, for a task with a goal and for `crafter`.
REWARD_TASK = "1 when the task gets done"
REWARD_GAME = "the game's own: +1 for each achievement unlocked the first time in an episode, +-0.1 per health point"

# {code_actions}: one line per code sub-action of the plan. ORIGIN marks reference/skills.py's hand-written code.
NOOP_CHARGED = "a call that takes none is charged one noop step"
NOOP_FREE = ("a call that returns without True before taking any step costs no step (counted as 0: the RL agent "
             "decides again in the same state, that code action masked until a step is taken); any other call that "
             "takes none (it returned True or raised an error) is charged one noop step")
NOOP_ORDER = ("; under this plan's \"follow_order\" a call that returns without True after steps is masked for the "
              "next decision")
CODE_ACTION_LINE = ("- {name}{origin}: chosen {chosen} times, share {share}, success {success}, {steps} primitive "
                    "steps and reward {reward} per call; calls ended: {ends}; errors: {errors}")
CODE_ROUTINE_LINE = ("- {name}{origin}: {chosen} calls, success {success}, {steps} primitive steps and reward "
                     "{reward} per call; calls ended: {ends}; errors: {errors}")
ORIGIN = " (hand-written, skills.py)"
# ... and under a plan with "follow_order", one more line: how closely the RL agent kept to the order (ppo.py)
ORDER_LINE = ("- the plan's order (\"follow_order\"): at {named} of the RL agent's {decisions} decisions the order "
              "named a code action that could start (the first in the plan's order whose initiation held and that "
              "had not just returned without True), and the agent chose that one at {followed} of them (share "
              "{share}). The lesson that teaches it (a cross-entropy towards that code action, added to the RL "
              "agent's loss) weighed {first} at this iteration's first update and {last} at its last; a share near 1 "
              "means that there the agent did what the order says")
NOT_WRITTEN_LINE = "- {name}: not written (--mode rl+config runs the plan's RL configuration, no code)"
LEFT_TO_RL_LINE = "- {name}: no code was accepted for it, so it was left to RL"

_STR, _STRS = {"type": "string"}, {"type": "array", "items": {"type": "string"}}
# summary and fixes are always required, to_code and to_rl where RL runs; the acting critic's other fields are
# optional, so an LLM reply without them still parses (and changes nothing but the moves and fixes)
FEEDBACK_SCHEMA = {"type": "object", "required": ["summary", "to_code", "to_rl", "fixes"], "properties": {
    "summary": _STR, "to_code": _STRS, "to_rl": _STRS,
    "fixes": {"type": "object", "additionalProperties": {"type": "string"}},
    "variants": {"type": "object", "additionalProperties": {"type": "string"}},
    "initiations": {"type": "object", "additionalProperties": INITIATION_SCHEMA},
    "rl_config": {"type": "object", "properties": {
        "shaping": {"type": "object", "additionalProperties": {"type": "number"}}, "mask_actions": _STRS}},
    "reasons": _STRS}}
RL_MOVES = ("to_code", "to_rl", "initiations", "rl_config")  # what only a run with RL may change


def feedback_schema(variants: bool, rl: bool = True, view: bool = True) -> dict:
    """FEEDBACK_SCHEMA, without "variants" where the run uses no hand-written code, without the RL moves where no
    RL runs (--mode code) and without an initiation's view tests where the game's API has no view (`view` False):
    nothing offered that does not exist."""
    props = {k: v for k, v in FEEDBACK_SCHEMA["properties"].items()
             if (variants or k != "variants") and (rl or k not in RL_MOVES)}
    if "initiations" in props and not view:
        props["initiations"] = {"type": "object", "additionalProperties": INITIATION_SCHEMA_NO_VIEW}
    required = [k for k in FEEDBACK_SCHEMA["required"] if k in props]
    return {**FEEDBACK_SCHEMA, "required": required, "properties": props}
