"""Tests for sandbox.py: the adversarial corpus is caught, legitimate code still runs, errors point at
the model's own lines, api stops cannot be swallowed, and time inside api calls is free.

    python -m pytest -q tests/test_sandbox.py
"""

import builtins
import signal
import sys
import threading
import time
from textwrap import dedent

import numpy as np
import pytest

import sandbox
from sandbox import SandboxError
from tests.adversarial_corpus import CORPUS


class Secret:
    """Stands for an env object that must never reach model code."""

    def steal(self) -> str:
        return "stolen"


class FakeApi:
    """A tiny primitive API: step() spends a budget and raises the sandbox's StepBudgetExceeded."""

    def __init__(self, budget: int = 5, sleep: float = 0.0):
        self._budget, self._sleep, self.steps = budget, sleep, 0
        self.secret = Secret()
        self._nested, self._flat = [[1, 2], [3, 4]], [1, 2]
        self.traces: list[object] = []

    def step(self) -> int:
        if self.steps >= self._budget:
            raise sandbox.StepBudgetExceeded(f"budget of {self._budget} steps spent")
        self.steps += 1
        return self.steps

    def end(self) -> None:
        raise sandbox.EpisodeEnded()

    def leak(self) -> None:
        raise ValueError(Secret())

    def slow(self) -> bool:
        """Sleeps like a slow env step, and records which tracer is active in api code."""
        self.traces.append(sys.gettrace())
        time.sleep(self._sleep)
        return True

    def grid(self) -> np.ndarray:
        return np.arange(6, dtype=np.int64).reshape(2, 3)

    def targets(self, nested: bool) -> list:
        """Returns internal state, which model code must not be able to change through the result."""
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


CANARY = """
def act(api):
    n = 0
    while api.step() < 3:
        n += 1
    return n == 2
"""


def _run(source: str, api: object | None = None, entry: str = "act", **kwargs) -> sandbox.RunResult:
    return sandbox.run(sandbox.compile_action(dedent(source).lstrip("\n"), entry), api or FakeApi(), **kwargs)


@pytest.fixture(scope="module")
def process_state():
    """What an escaped snippet could damage, snapshotted once the sandbox is warm."""
    _run(CANARY)
    return dict(vars(builtins)), set(sys.modules), dict(sandbox._BUILTINS), sys.gettrace()


def test_corpus_is_big_enough():
    assert len(CORPUS) >= 40
    assert len({case.name for case in CORPUS}) == len(CORPUS)
    assert sum(case.expect == ("check",) for case in CORPUS) >= 20
    assert sum(case.expect != ("check",) for case in CORPUS) >= 20


@pytest.mark.parametrize("case", CORPUS, ids=[case.name for case in CORPUS])
def test_adversarial_snippet_is_caught(case, process_state):
    start = time.perf_counter()
    try:
        fn = sandbox.compile_action(case.source, "act")
    except SandboxError as e:
        outcome, log = "check", []
        assert e.lineno is None or 1 <= e.lineno <= case.source.count("\n")
    else:
        result = sandbox.run(fn, FakeApi())
        outcome = result.stopped or ("error" if result.error else f"returned {result.returned!r}")
        log = result.log
    assert outcome in case.expect
    assert time.perf_counter() - start < 2.0
    assert sum(len(line) for line in log) <= sandbox.MAX_LOG_CHARS + 100
    # the process is unharmed: builtins, modules, the sandbox's own tables, the tracer, and a canary
    builtins_before, modules_before, sandbox_builtins, trace = process_state
    assert dict(vars(builtins)) == builtins_before
    assert set(sys.modules) == modules_before
    assert sandbox._BUILTINS == sandbox_builtins
    assert sys.gettrace() is trace
    assert sys.exc_info() == (None, None, None)  # no handled exception (and its frames) left behind
    canary = _run(CANARY)
    assert (canary.returned, canary.error, canary.stopped) == (True, None, None)


def test_legitimate_code_runs():
    result = _run('''
        """Walks a few steps, with helpers, loops, comprehensions and handled errors."""


        def double(x: int) -> int:
            return x * 2


        def act(api) -> bool:
            total, counts = 0, {}
            for i in range(4):
                total += double(i)
                counts["even" if i % 2 == 0 else "odd"] = counts.get("odd", 0) + 1
            try:
                int("not a number")
            except (ValueError, KeyError) as e:
                print(f"ignored: {e}")
            names = sorted(["b", "a"], key=lambda s: s)
            grid = api.grid()
            print("-".join(names), str(total), f"{total / 4:.2f}", isinstance("x", str), grid)
            while api.step() < 2:
                pass
            return total == 12 and grid[1][2] == 5 and isinstance(grid, list) and len(counts) == 2
    ''')
    assert (result.returned, result.error, result.stopped) == (True, None, None)
    assert result.log == ["ignored: invalid literal for int() with base 10: 'not a number'",
                          "a-b 12 3.00 True [[0, 1, 2], [3, 4, 5]]"]


def test_runtime_error_reports_the_models_line_and_text():
    result = _run("""
        def act(api):
            a = 1
            x = a / 0
            return True
    """)
    assert result.lineno == 3
    assert result.error.startswith("line 3: ZeroDivisionError: division by zero")
    assert result.error.splitlines()[1].strip() == "x = a / 0"
    assert result.stopped is None


def test_error_in_helper_reports_the_helper_line():
    result = _run("""
        def pick(cells):
            return cells[10]

        def act(api):
            return pick([1, 2, 3])
    """)
    assert result.lineno == 2 and "IndexError" in result.error and "return cells[10]" in result.error


def test_check_rejects_with_the_models_line():
    with pytest.raises(SandboxError) as info:
        sandbox.check("def act(api):\n    x = 1\n    import os\n    return True\n", "act")
    assert info.value.lineno == 3 and str(info.value).startswith("line 3: ")
    with pytest.raises(SandboxError, match="exactly one function"):
        sandbox.check("def other(api):\n    return True\n", "act")
    with pytest.raises(SandboxError, match="SyntaxError"):
        sandbox.check("def act(api):\n    return (\n", "act")


def test_step_budget_in_api_cannot_be_swallowed():
    api = FakeApi(budget=3)
    result = _run("""
        def act(api):
            while True:
                try:
                    api.step()
                except Exception:
                    pass
    """, api)
    assert result.stopped == "step_budget" and result.error is None
    assert api.steps == 3 and result.lineno == 4


def test_interrupts_are_not_exceptions():
    for stop in (sandbox.StepBudgetExceeded, sandbox.EpisodeEnded, sandbox.TimeBudgetExceeded):
        assert issubclass(stop, sandbox.Interrupt) and not issubclass(stop, Exception)


def test_time_inside_api_calls_is_not_counted():
    api = FakeApi(sleep=0.15)
    start = time.perf_counter()
    result = _run("""
        def act(api):
            for _ in range(4):
                api.slow()
            return True
    """, api, time_limit=0.3)
    assert time.perf_counter() - start > 0.6  # the api slept for twice the time limit ...
    assert (result.returned, result.stopped) == (True, None)  # ... and the code was not stopped
    assert api.traces == [None] * 4  # the sandbox's tracer is off inside api code


def test_time_budget_still_applies_after_api_calls():
    start = time.perf_counter()
    result = _run("""
        def act(api):
            api.slow()
            while True:
                sorted(range(200000))  # slow lines: the time budget, not the line budget, stops this
    """, FakeApi(sleep=0.2), time_limit=0.3)
    assert result.stopped == "time_budget" and "0.3 s" in result.error and result.lineno in (3, 4)
    assert 0.45 < time.perf_counter() - start < 1.5


def test_line_budget_stops_fast_endless_loops():
    start = time.perf_counter()
    result = _run("def act(api):\n    while True:\n        pass\n", time_limit=10.0)
    assert result.stopped == "time_budget" and f"{sandbox.MAX_LINES} lines" in result.error
    assert time.perf_counter() - start < 2.0


def test_outer_tracer_is_kept_and_used_inside_api_calls():
    """A coverage tool's tracer (set for new threads too) still sees env code run by code actions."""
    def outer(frame, event, arg):
        return None

    api = FakeApi()
    sys.settrace(outer)
    threading.settrace(outer)
    try:
        result = _run("def act(api):\n    return api.slow()\n", api)
        after = sys.gettrace()
    finally:
        sys.settrace(None)
        threading.settrace(None)
    assert result.returned is True and after is outer and api.traces == [outer]


def test_api_proxy_is_read_only_and_plain():
    result = _run("""
        def act(api):
            return [api.grid(), api.step()]
    """)
    assert result.returned == [[[0, 1, 2], [3, 4, 5]], 1]
    assert type(result.returned[0][0][0]) is int
    api = FakeApi()
    result = _run("""
        def act(api):
            nested, flat = api.targets(True), api.targets(nested=False)
            nested[0][0] = 99
            flat.append(3)
            return [nested, flat]
    """, api)
    assert result.returned == [[[99, 2], [3, 4]], [1, 2, 3]]
    assert api.targets(True) == [[1, 2], [3, 4]] and api.targets(False) == [1, 2]
    proxy = sandbox._ApiProxy(FakeApi(), sandbox._Run(1.0))
    with pytest.raises(AttributeError):
        proxy.step = None
    with pytest.raises(AttributeError):
        del proxy.step
    with pytest.raises(AttributeError):
        proxy._budget  # noqa: B018 - the access itself is the test


def test_print_output_is_captured_and_bounded():
    result = _run("""
        def act(api):
            for i in range(3000):
                print("line", i, "x" * 10)
            return True
    """)
    assert result.returned is True
    assert result.log[0] == "line 0 xxxxxxxxxx"
    assert sum(len(line) for line in result.log) <= sandbox.MAX_LOG_CHARS + 100


def test_moderate_recursion_and_sizes_are_allowed():
    result = _run("""
        def depth(n):
            return 0 if n == 0 else 1 + depth(n - 1)

        def act(api):
            cells = [0] * 4096
            text = "ab" * 1000
            small = text.replace("a", "") == "b" * 1000 and 2 ** 60 - 1 + 1 == 2 ** 60
            return depth(100) == 100 and len(cells) == 4096 and small
    """)
    assert (result.returned, result.error) == (True, None)


def test_memory_growth_is_stopped(monkeypatch):
    monkeypatch.setattr(sandbox, "MEMORY_LIMIT_MB", 32)
    result = _run("""
        def act(api):
            chunks = []
            for i in range(64):  # 512 MB at most, should the memory check fail
                chunks.append([i] * 1000000)
            return True
    """, time_limit=10.0)
    assert result.stopped == "memory" and result.lineno in (3, 4) and "memory" in result.error


def test_hashing_deeply_nested_tuples_does_not_crash():
    """CPython 3.11 hashes tuples by unguarded C recursion: 180k levels overflow a default 8 MB stack
    (a segfault that would kill this test process), but not the sandbox thread's."""
    result = _run("""
        def act(api):
            x = ()
            for _ in range(20000):
                x = (((((((((x,),),),),),),),),)
            return len({x: 1})
    """)
    assert (result.returned, result.error) == (1, None)


def test_zip_and_enumerate_do_not_follow_a_growing_list():
    """`a.extend(zip(a))` would loop forever inside C (no line events) if zip read the live list."""
    a = [1, 2]
    zipped, numbered = sandbox._zip(a), sandbox._enumerate(a)
    a.append(3)
    assert list(zipped) == [(1,), (2,)] and list(numbered) == [(0, 1), (1, 2)]


def test_code_called_outside_run_cannot_print():
    fn = sandbox.compile_action("def act(api):\n    print('hi')\n", "act")
    with pytest.raises(RuntimeError, match="sandbox.run"):
        fn(None)
