"""The code writer's messages: their templates, its default example and the rules of the sandbox's checker
in the checker's own words.

fast_agent.FastAgent.write fills them: WRITE_PROMPT first (at most CODE_REPLY_TOKENS back, no schema: the
reply is code in a fence), then RETRY_PROMPT after each failed check or dry run. Map of every message:
prompts/__init__.py.

    python train.py --task collect_wood --show-prompt    # this message, for the reference plan's first code action
"""

from __future__ import annotations

import ast
import math

from sandbox import checker, guards, limits

WRITE_SYSTEM = """You write code actions for an agent in the game {game}. A code action is one Python \
function that plays the game only through the `api` object passed to it. The request below says when it is \
called; each call runs until the function returns or its step budget is spent."""

WRITE_PROMPT = """The API:
{api_doc}

{examples}

Rules: the sandbox checks the code before it runs and rejects code that breaks one of these, with the \
error quoted here.
{rules}
- Return True when it succeeded and False when it could not; stop early rather than wander.
- You see only this request: no other code action, spec or earlier code exists for you unless it is \
shown here.
- Your reply is cut off after {max_tokens} tokens.

Write `{name}`: {spec}{initiation}{current}{feedback}
Reply with only the code in one ```python block."""

# {initiation} in WRITE_PROMPT: where the function will be called (the sub-action's initiation condition).
INITIATION_NOTE = ("\nThe RL agent calls it only in states where this holds when the call starts (checked before "
                   "each call, so the code may rely on it then): {condition}.")
ANYWHERE_NOTE = "\nIt may be called in any state: no condition is checked before a call."


EXAMPLE = "Example{what}:\n```python\n{source}\n```"
# The example's code for a Crafter task when the skill library offers none: deliberately a skill of another
# task than the default one (collect_wood), so the prompt never hands the model the answer it is asked
# for. A MineDojo task gets minedojo_skills.EXAMPLE, for the same reason.
DRINK_WATER = '''
def drink_water(api):
    """Walk to the nearest visible water and drink from it once."""
    if not api.go_to("water", 30):
        return False
    return api.do()
'''

CURRENT_NOTE = """
This changes the code now in use for `{name}` (`{version}`); reply with the whole new version:
```python
{source}
```{stats}"""

STATS_NOTE = ("\nWhat it did in the last iteration's training: called {chosen} times; a share "
              "{ok} of those calls succeeded (returned True, or the task was solved during the call); {steps} "
              "environment steps per call on average; how its calls ended, with their number: {ends}; most "
              "common errors, with their number of calls: {errors}.")

FEEDBACK_NOTE = "\nThe critic's note on the code now in use: {feedback}"

RETRY_PROMPT = """Your code failed: {error}{line}
Reply with the whole corrected code in one ```python block."""

LINE_NOTE = "\nLine {n} of your code is: {text}"

# The dry run's error for a call that spent its budget, in place of the bare "stopped: step_budget".
BUDGET_NOTE = ("it used all {n} environment steps of one call without returning; return sooner "
               "(api.steps_left() says how many are left)")

# Code runs about 3 to 4 characters a token, so the longest code the checker accepts fits in one reply.
CODE_REPLY_TOKENS = math.ceil(limits.MAX_SOURCE_CHARS / 3)

# Python's words for the syntax the checker's allowlist leaves out (checker._ALLOWED_NODES); a node
# missing here is shown by its ast name, which is also how the checker's error names it.
KEYWORDS = {"Import": "import", "ImportFrom": "from ... import", "ClassDef": "class", "Global": "global",
            "Nonlocal": "nonlocal", "With": "with", "AsyncWith": "async with", "AsyncFor": "async for",
            "AsyncFunctionDef": "async def", "Await": "await", "Yield": "yield", "YieldFrom": "yield from",
            "Match": "match", "TryStar": "except*"}


def code_rules(name: str) -> str:
    """Every rule checker.check enforces, worded as its errors are, built from the sandbox's own tables so
    the prompt and the checker cannot drift apart (tests/test_fast_agent.py breaks each rule once)."""
    kinds = [n for n in ast.stmt.__subclasses__() + ast.expr.__subclasses__()
             if not issubclass(n, checker._ALLOWED_NODES)]
    denied = ", ".join(f"`{KEYWORDS.get(k.__name__, k.__name__)}` ({k.__name__})" for k in kinds)
    builtins = ", ".join(sorted(guards._BUILTINS))
    rules = [
        f"- \"define exactly one function `def {name}(api):`\"; \"the entry function must take exactly one "
        f"argument: `def {name}(api):`\". Helper functions may be defined next to it. \"only function definitions "
        "may appear at the top level\": no constants, imports or other statements outside a function (a module "
        "docstring is allowed).",
        f"- \"<Name> is not allowed in code actions\" for these: {denied}.",
        "- \"names starting with '_' are not allowed\": `_` alone is allowed (`for _ in range(3)`); "
        "\"keyword names starting with '_' are not allowed\"; \"the attribute .<name> is not allowed\" for "
        f"attributes starting with `_` or {', '.join(p + '...' for p in checker._DENIED_PREFIXES)} and for "
        f"{', '.join('.' + a for a in sorted(checker._DENIED_ATTRS))} (use f-strings to format text).",
        f"- \"'<name>' is not available in code actions\": {', '.join(sorted(checker._FORBIDDEN_NAMES))}. "
        f"The only built-ins are {builtins}; \"do not rebind the built-in name '<name>'\".",
        "- \"assigning or deleting attributes is not allowed (the api is read-only)\"; \"decorators are not "
        "allowed\"; \"default argument values must be plain constants\".",
        f"- \"`except` must name built-in exceptions ({', '.join(guards.SAFE_EXCEPTIONS)})\", so no bare "
        "`except:`; \"`finally` is not allowed\".",
        "- \"bytes literals are not allowed\"; \"integer literals beyond +-2**60 are not allowed\"; \"an f-string "
        f"may have at most {checker._MAX_FSTRING_FIELDS} fields\"; \"f-string format specs must be constants with "
        "widths below 1000\"; \"at most one *unpacking per call or display\".",
        f"- \"the code must be a string of at most {limits.MAX_SOURCE_CHARS} characters\", and it must compile "
        "(\"SyntaxError: ...\").",
        "- While it runs: %-formatting of strings, integers beyond +-2**60 and strings or lists longer than "
        f"{limits.MAX_LEN:,} items are refused; one call may run for at most "
        f"{limits.TIME_LIMIT_S:g} s of wall time outside its environment steps (its own code and every api call "
        f"that takes no step count) and at most {limits.MAX_ITERATIONS:,} loop iterations and calls of its own "
        "functions.",
    ]
    return "\n".join(rules)
