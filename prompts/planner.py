"""The planner's message: its templates and the reply schema.

slow_agent.plan_messages fills them; slow_agent.SlowAgent.plan sends the message with `plan_schema`'s
schema and checks the reply (Plan.from_dict). Map of every message: prompts/__init__.py.

    python slow_agent.py --task collect_diamond      # this message, exactly as sent
"""

PLAN_SYSTEM = """You are the slow agent of RL-GPT, planning for the game {game}. You split a task into \
sub-actions and decide for each whether it is written as code ("code") or learned by reinforcement \
learning ("rl"). Code suits a clear procedure over the API (walk to a visible target and act on it, \
craft, place, repeat an action); RL suits trial and error and reacting to what is seen (exploring, \
fighting, surviving). Each code sub-action becomes one extra action the RL agent may choose; it \
always keeps the base actions too."""

PLAN_PROMPT = """Task `{task}`: {description}
Success test (what every success rate counts): {success}.
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
"rl_config" (the menu below, but for "follow_order"), used on top of the plan's while that sub-task is \
being trained, and for a "code" sub-action its "initiation": {initiation}}}.
- "rl_config": only from this menu: "shaping": {{inventory item: reward per unit gained, {lo} to {hi}}} \
with items from {items}; "mask_actions": base actions the RL agent never needs for this task; \
"follow_order": true when the "code" sub-actions, in the order you list them, are an order of priorities to \
start from (most urgent first): while it trains, the RL agent is also taught to call, in each state, the \
first of them whose initiation holds and that has not just returned without True (one that returns without \
True after taking steps may not start at the very next decision, so the order goes on down the list; one that \
returns without True before taking any step may not start until a step is taken, as under any plan); \
the lesson weighs less as training goes on (by default it falls to a fifth of its starting weight within the \
first fifth of training and stays there), so RL decides more and more where to leave the order (default \
false: no order is taught).
A "code" sub-action's spec is all its code writer reads, with the API doc above and an example: it never \
sees the other sub-actions, their specs or their code, so each spec must stand alone (never "as X does"). \
Its success test must be observable through the API ({observable}), and what it asks must fit in one \
call's step budget (see "How a code action runs").
An "initiation" says where a code sub-action can start (the options framework's initiation set): the RL \
agent may choose it only in states where every condition holds, checked before each of its decisions; \
without one it may be chosen anywhere. A call that cannot do its job still costs a decision (and the steps \
it takes before it gives up, if any), so give the conditions it certainly needs (e.g. \
{initiation_examples}), never one that would hide a state where it could succeed. Its items are the inventory \
items listed under "rl_config" above, counted as the API's inventory() counts them."""

INITIATION_VIEW = ('{{"inventory": {{item: held at least this many}}, "inventory_below": {{item: held fewer than '
                   'this many}}, "in_view": [names that must all be in the view], "in_view_any": [names of which at '
                   'least one must be in the view], "not_in_view": [names none of which may be in the view]}}, each '
                   'part optional, every part given must hold; view names: {cells}')
# {initiation_examples} in PLAN_PROMPT: conditions a code action certainly needs, only of kinds the game's
# initiation can test (MineDojo's API has no view, and its inventory no meters)
EXAMPLES_VIEW = ('a recipe\'s materials held and its station in view; the tool it makes not yet held: '
                 '"inventory_below" {the tool: 1}; a meter below a level; one of several targets in view; a station it '
                 'places not in view yet')
EXAMPLES_INVENTORY = 'a recipe\'s materials held; the item it makes not yet held: "inventory_below" {the item: 1}'
# {observable} in PLAN_PROMPT: what a code action's success test can read, by the same split
OBSERVABLE_VIEW, OBSERVABLE_INVENTORY = "an inventory count, what view() or in_front() shows", "an inventory count"
INITIATION_INVENTORY = ('{{"inventory": {{item: held at least this many}}, "inventory_below": {{item: held fewer than '
                        'this many}}}}, each part optional, every part given must hold (this game\'s API has no view '
                        'to test)')

SUBTASKS_LONG = ("this task has a long prerequisite chain, so first list the chain of sub-tasks that "
                 "reaches it, in order, ending with the task itself; then give sub-actions that serve them. ")
SUBTASKS_TEST = ("this task has a long prerequisite chain, so first list the chain of sub-tasks that leads to "
                 "its success test, in order, ending with the last milestone the test needs (the test itself is not a "
                 "milestone); then give sub-actions that serve them. ")
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

_STR, _STRS = {"type": "string"}, {"type": "array", "items": {"type": "string"}}
_COUNTS = {"type": "object", "additionalProperties": {"type": "integer"}}
INITIATION_SCHEMA = {"type": "object", "properties": {"inventory": _COUNTS, "inventory_below": _COUNTS,
                                                      "in_view": _STRS, "in_view_any": _STRS, "not_in_view": _STRS}}
# ... for a game whose API has no view to test (MineDojo's): the inventory's parts alone
INITIATION_SCHEMA_NO_VIEW = {"type": "object", "properties": {"inventory": _COUNTS, "inventory_below": _COUNTS}}
PLAN_SCHEMA = {"type": "object", "required": ["subtasks", "subactions", "rl_config"], "properties": {
    "subtasks": _STRS,
    "subactions": {"type": "array", "minItems": 1, "items": {
        "type": "object", "required": ["name", "how", "spec", "reason"],
        "properties": {"name": _STR, "how": {"enum": ["code", "rl"]}, "spec": _STR, "reason": _STR,
                       "reuse": {"type": "boolean"}, "subtask": _STR,
                       "rl_config": {"type": "object"}, "initiation": INITIATION_SCHEMA}}},
    "rl_config": {"type": "object", "properties": {
        "shaping": {"type": "object", "additionalProperties": {"type": "number"}}, "mask_actions": _STRS,
        "follow_order": {"type": "boolean"}}}}}


def plan_schema(reuse: bool, view: bool = True) -> dict:
    """PLAN_SCHEMA, without "reuse" for a run with no skill library and without an initiation's view tests for a
    game whose API has no view (`view` False): never offer what does not exist."""
    if reuse and view:
        return PLAN_SCHEMA
    items = PLAN_SCHEMA["properties"]["subactions"]["items"]
    props = {k: v for k, v in items["properties"].items() if reuse or k != "reuse"}
    props["initiation"] = INITIATION_SCHEMA if view else INITIATION_SCHEMA_NO_VIEW
    subactions = {**PLAN_SCHEMA["properties"]["subactions"], "items": {**items, "properties": props}}
    return {**PLAN_SCHEMA, "properties": {**PLAN_SCHEMA["properties"], "subactions": subactions}}
