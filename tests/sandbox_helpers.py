"""Shared set-up for tests/test_sandbox.py, tests/test_sandbox_budgets.py and tests/test_sandbox_worker.py (no tests
here): a canary that runs to its end in any working sandbox, the fake api model code runs against, the hang
guard that turns a sandbox failing to stop code into a failure, and one worker per test file with a helper to
run code in it.
"""

import signal
import sys
import time
from textwrap import dedent

import numpy as np
import pytest

from sandbox import host, limits

# code that runs to its end in any working sandbox: a test of containment ends with it
CANARY = """
def act(api):
    n = 0
    while api.step() < 3:
        n += 1
    return n == 2
"""


class Secret:
    """Stands for an env object that must never reach model code."""

    def steal(self) -> str:
        return "stolen"


class FakeApi:
    """A tiny primitive API: step() spends a budget and raises the sandbox's StepBudgetExceeded. It
    counts its env steps in `_steps` and their time in `_env_time`, as core.PrimitiveAPI does."""

    _QUERIES = ("where",)  # answered ahead by the trainer, as CrafterAPI's are

    def __init__(self, budget: int = 5, sleep: float = 0.0):
        self._budget, self._sleep, self._steps, self._env_time = budget, sleep, 0, 0.0
        self.wheres = 0
        self.secret = Secret()
        self._nested, self._flat = [[1, 2], [3, 4]], [1, 2]
        self.traces: list[object] = []

    def step(self) -> int:
        if self._steps >= self._budget:
            raise limits.StepBudgetExceeded(f"budget of {self._budget} steps spent")
        self._steps += 1
        return self._steps

    def where(self) -> list[int]:
        """A query: reads the state only."""
        self.wheres += 1
        return [self._steps]

    def end(self) -> None:
        raise limits.EpisodeEnded()

    def leak(self) -> None:
        raise ValueError(Secret())

    def slow(self) -> bool:
        """Sleeps like a slow env step (counted as one, as core.PrimitiveAPI counts them), and records
        which tracer is active in api code."""
        self.traces.append(sys.gettrace())
        start = time.perf_counter()
        time.sleep(self._sleep)
        self._steps += 1
        self._env_time += time.perf_counter() - start
        return True

    def query(self, i: int = 0) -> int:
        """A call that takes no env step but its time (a slow view() on a loaded machine)."""
        time.sleep(self._sleep)
        return self._steps

    def grid(self) -> np.ndarray:
        return np.arange(6, dtype=np.int64).reshape(2, 3)

    def targets(self, nested: bool) -> list:
        """Returns internal state, which model code must not be able to change through the result."""
        self.traces.append(nested)
        return self._nested if nested else self._flat


class Hang(BaseException):
    """Raised by the hang guard; a BaseException so that no model `except` can catch it."""


@pytest.fixture(autouse=True)
def hang_guard():
    """A sandbox that fails to stop the code would hang the suite: turn that into a failure instead."""
    def fail(signum, frame):
        raise Hang("the sandbox did not stop the code within 20 s")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.setitimer(signal.ITIMER_REAL, 20)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module", name="worker")  # named apart so test arguments do not shadow it
def worker_fixture():
    """One worker for the file, as an env has one: each test also shows that it survived the last."""
    w = host.Worker()
    yield w
    w.close()


def _run(worker: host.Worker, source: str, api: object | None = None, entry: str = "act",
         **kwargs) -> limits.RunResult:
    return worker.run(dedent(source).lstrip("\n"), entry, api or FakeApi(), **kwargs)
