"""The sandbox's limits, the stops that end a run of model code when one is spent, and what a run reports.

The numbers are enforced where they apply: the source size and integer literals by the checker
(checker.py), sizes by the guards compiled into the code (guards.py), time, iterations, depth and
memory by the worker process (worker.py), the api boundary by both sides of it (worker.py, host.py).
"""

from dataclasses import dataclass, field

MAX_SOURCE_CHARS = 20_000  # a code action is a short function, not a program
MAX_LEN = 1_000_000  # longest str/list/tuple/range one operation may build, or a builtin may consume
# Largest |int| the code may build. From 2**61 - 1 on, ints share hashes (hash(x) is x mod 2**61 - 1),
# and a set of a few thousand colliding ints takes seconds of quadratic work in one C call.
MAX_INT = 2**60
TIME_LIMIT_S = 1.0  # wall time a call may run outside its env steps (env.CodeActionWrapper's default)
MAX_DEPTH = 200  # nested calls of the model's own functions
MAX_ITERATIONS = 50_000  # loop iterations plus calls of the model's own functions per run: a deterministic
# bound on its work. Each runs at least one line, so this refuses nothing a 50,000-line budget allows; the
# reference programs' longest call made 4,452 (crafter's whole-task program, 4,313 calls; 349 on average)
MEMORY_LIMIT_MB = 128  # resident memory the model's code may add during one run
# C stack of the thread running model code. CPython 3.11 hashes nested tuples by unguarded C recursion,
# ~64 bytes a level; the memory limit allows ~2.4M levels of 56-byte tuples, which need ~150 MB
# (a default 8 MB stack segfaults past ~120k levels). Only the pages touched are ever used.
STACK_MB = 256
MAX_LOG_CHARS = 10_000  # print() output kept per run
MAX_PLAIN_ITEMS = 100_000  # items in one value crossing the api boundary
MAX_CALL_CHARS = 2_000  # an api call's arguments (names, counts, directions): never bulk data
FILENAME_PREFIX = "<llm:"  # code objects compiled from model source; only these are traced


class Interrupt(BaseException):
    """Base of every stop imposed on LLM code: a BaseException, which no `except` it may write catches.
    `reason` is what RunResult.stopped reports."""

    reason = "interrupt"


class StepBudgetExceeded(Interrupt):
    """Raised by the primitive API when the action's env-step budget is spent."""
    reason = "step_budget"


class EpisodeEnded(Interrupt):
    """Raised by the primitive API when the episode terminated or was truncated inside the action."""
    reason = "episode_ended"


class TimeBudgetExceeded(Interrupt):
    """The code ran past its time budget (env steps excluded) or its line budget."""
    reason = "time_budget"


class MemoryBudgetExceeded(Interrupt):
    reason = "memory"


class RecursionBudgetExceeded(Interrupt):
    reason = "recursion"


@dataclass
class RunResult:
    """What one call of a code action did; `error` and `lineno` are written for the fast agent's retry.
    Made inside the worker process, from small plain values only."""

    returned: object  # what the function returned, as JSON-like plain data (tuples become lists;
    # None if it did not return)
    error: str | None  # "line 3: ZeroDivisionError: division by zero\n    x = 1 / 0"; also set for
    # the sandbox's own stops (time or iterations, memory, recursion, api calls, a killed worker), which
    # are the code's fault
    lineno: int | None  # line in the model's code where it failed or was stopped
    stopped: str | None  # None or a reason: "step_budget", "episode_ended", "time_budget", "crashed", ...
    log: list[str] = field(default_factory=list)  # captured print() lines, at most MAX_LOG_CHARS

