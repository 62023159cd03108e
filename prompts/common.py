"""The pieces more than one message includes: how a code action runs (in every API doc) and the notes that
send an unusable structured reply back to the model.

A leaf: it imports nothing of the project, so core.py and llm.py, which sit below every agent, can take
their texts from here. Map of every message: prompts/__init__.py.
"""

# In the API doc (core.api_doc), after the recipes: the planner and the code writer read it. {budget}: the
# run's --max-macro-steps.
CALL_RULES = """How a code action runs: the RL agent chooses it like one of its base actions, and each call \
is one of the agent's decisions however many environment steps it takes. A call ends when the function \
returns, when it has taken {budget} environment steps (the call is stopped and counts as failed: \
"stopped: step_budget"; api.steps_left() counts down, and every environment step the call takes, through \
any api call, draws on it) or when the episode ends (stopped, not a failure). A call succeeds when it returns \
True or the task is solved during it. A call that returns without True before taking any step costs the RL agent's \
decision but no step: the agent decides again in the same state, and that code action may not start again \
until a step is taken (where there is no RL agent and one routine is called on every decision, such a call is \
charged one noop step instead, so that time moves on). Under a plan with "follow_order", one that returns \
without True after taking steps may not start at the very next decision. Nothing is kept from one call to \
the next: each call starts from the world as it is then."""

# How one call of a code action ended (env.CodeActionWrapper's info["code_end"], counted per code action by
# code_actions.CodeStats): key -> the words the critic, the code writer, the summary and the results show.
CALL_ENDS = {
    "true": "returned True (or the task got done during the call)",
    "false_at_once": "returned without True before taking any step",
    "false_after_steps": "returned without True after taking steps",
    "step_budget": "stopped at its step budget",
    "episode_end": "stopped by the episode's end",
    "error": "raised an error or broke a sandbox limit",
}


def call_ends_text(ends: dict[str, int]) -> str:
    """How a code action's calls ended, in words with each count (the ends no call had left out)."""
    shown = [f"{CALL_ENDS[end]} {ends[end]}" for end in CALL_ENDS if ends.get(end)]
    return ", ".join(shown) or "not counted"

# ----------------------------------------------------------------------------------------------
# llm.LLMClient: the reply schema for an endpoint that takes none, and what goes back when a reply is
# unusable (llm.parse_json, LLMClient._content); the agents send these back as the next user turn.

JSON_INSTRUCTION = (
    "\n\nReply with only a JSON value that matches this JSON schema, "
    "with no prose and no code fence:\n{schema}"
)
NOT_JSON = "Your reply did not contain valid JSON ({error}). Reply with only the JSON value, nothing else."
CUT_OFF = "Your reply was cut off at the {n}-token limit. Reply again, much more briefly."
NO_CHOICES = "The server returned no choices (empty reply, possibly filtered). Try again."
SCHEMA_MISMATCH = (
    "Your JSON did not match the required schema: at {where}: {error}. "
    "Reply again with only a corrected JSON value."
)

# slow_agent.SlowAgent._ask, for the planner and the critic: {error} is llm's note above, or the ValueError
# of a reply on the schema that is no valid plan or feedback (Plan.from_dict, critic.check_feedback).
REPAIR_PROMPT = "Your reply was rejected: {error}\nReply again with only the whole corrected JSON."
