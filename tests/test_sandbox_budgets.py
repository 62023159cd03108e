"""Tests for the sandbox's budgets and its trainer-side protocol (sandbox/: guards.py, worker.py,
host.py): api stops cannot be swallowed, env steps are off the code's clock and every other api call
on it, calls and queries are answered ahead without a round trip, print output is captured, and the
budget checks compiled into the code stop loops, recursion and memory growth, with a fast path for
plain arithmetic that gives the same outcome. Containment and error reporting are tests/test_sandbox.py's.

    python -m pytest -q tests/test_sandbox_budgets.py
"""

import itertools
import sys
import threading
import time

from sandbox import guards, host, limits
from tests.sandbox_helpers import FakeApi, _run, hang_guard, worker_fixture  # noqa: F401 - fixtures


def test_step_budget_in_api_cannot_be_swallowed(worker):
    api = FakeApi(budget=3)
    result = _run(worker, """
        def act(api):
            while True:
                try:
                    api.step()
                except Exception:
                    pass
    """, api)
    assert result.stopped == "step_budget" and result.error is None
    assert api._steps == 3 and result.lineno == 4


def test_interrupts_are_not_exceptions():
    for stop in (limits.StepBudgetExceeded, limits.EpisodeEnded, limits.TimeBudgetExceeded):
        assert issubclass(stop, limits.Interrupt) and not issubclass(stop, Exception)


def test_time_inside_env_steps_is_not_counted(worker):
    api = FakeApi(sleep=0.15)
    start = time.perf_counter()
    result = _run(worker, """
        def act(api):
            for _ in range(4):
                api.slow()
            return True
    """, api, time_limit=0.3)
    assert time.perf_counter() - start > 0.6  # the api slept for twice the time limit ...
    assert (result.returned, result.stopped) == (True, None)  # ... and the code was not stopped
    assert api.traces == [None] * 4  # the sandbox's tracer is off inside api code


def test_a_loop_of_api_calls_that_take_no_step_is_stopped_by_the_time_budget(worker):
    """Such calls are on the code's clock: a loop waiting on a slowed api stops at the time limit, not
    after some count of calls (2000 of these 5 ms calls would take 10 s)."""
    start = time.perf_counter()
    result = _run(worker, """
        def act(api):
            i = 0
            while api.query(i) < 1:  # each call differs, so none is answered by the worker's memo
                i += 1
    """, FakeApi(sleep=0.005), time_limit=0.3)
    took = time.perf_counter() - start
    assert result.stopped == "time_budget" and "0.3 s" in result.error and result.lineno in (2, 3), result
    assert took < 0.3 + host.KILL_AFTER_S


def test_time_budget_still_applies_after_api_calls(worker):
    start = time.perf_counter()
    result = _run(worker, """
        def act(api):
            api.slow()
            while True:
                sorted(range(200000))  # slow lines: the time budget, not the line budget, stops this
    """, FakeApi(sleep=0.2), time_limit=0.3)
    assert result.stopped == "time_budget" and "0.3 s" in result.error and result.lineno in (3, 4)
    assert 0.45 < time.perf_counter() - start < 1.5


def test_iteration_budget_stops_fast_endless_loops(worker):
    for loop in ("while True:\n        pass", "return len([i for i in range(10 ** 5) if i < 0])",
                 "def f(n):\n        return n\n    while True:\n        f(1)"):
        start = time.perf_counter()
        result = _run(worker, f"def act(api):\n    {loop}\n", time_limit=10.0)
        assert result.stopped == "time_budget" and f"more than {limits.MAX_ITERATIONS} loop" in result.error
        assert time.perf_counter() - start < 2.0 and result.lineno in (2, 3, 4), result


def test_calls_that_raise_give_their_depth_back(worker):
    """500 failing calls, each caught: the depth each took must be given back, or the 201st would stop."""
    result = _run(worker, """
        def fail(x):
            return 1 / x

        def act(api):
            g = lambda x: 1 / x
            for _ in range(500):
                for f in [fail, g]:
                    try:
                        f(0)
                    except ZeroDivisionError:
                        pass
            return True
    """)
    assert (result.returned, result.error) == (True, None)


def test_outer_tracer_is_kept_and_used_inside_api_calls(worker):
    """A coverage tool's tracer (set for new threads too) still sees env code run by code actions."""
    def outer(frame, event, arg):
        return None

    api = FakeApi()
    sys.settrace(outer)
    threading.settrace(outer)
    try:
        result = _run(worker, "def act(api):\n    return api.slow()\n", api)
        after = sys.gettrace()
    finally:
        sys.settrace(None)
        threading.settrace(None)
    assert result.returned is True and after is outer and api.traces == [outer]


def test_a_call_repeated_between_env_steps_is_answered_once(worker):
    """A call that took no env step changed nothing, so the same call again, before the next step,
    gets the same answer: from the worker's memo, as a fresh copy, without a round trip."""
    api = FakeApi()
    result = _run(worker, """
        def act(api):
            first = api.targets(True)
            first[0][0] = 99
            again = api.targets(True)
            other = api.targets(False)
            api.step()
            after = api.targets(True)
            return [first, again, other, after]
    """, api)
    assert result.returned == [[[99, 2], [3, 4]], [[1, 2], [3, 4]], [1, 2], [[1, 2], [3, 4]]]
    assert api.traces == [True, False, True]  # asked once before the step, once after


def test_queries_are_answered_ahead_without_a_round_trip(worker, monkeypatch):
    """The answers to the api's `_QUERIES` go with the reply to the first query and to each call that
    took a step: of these five calls two are round trips, and each query still reads the state it would."""
    messages, is_call = [], host._is_call
    monkeypatch.setattr(host, "_is_call", lambda m, names: is_call(m, names) and not messages.append(m[1]))
    api = FakeApi()
    result = _run(worker, """
        def act(api):
            first = api.where()
            first.append(9)
            again = api.where()
            api.step()
            return [first, again, api.where(), api.where()]
    """, api)
    assert result.returned == [[0, 9], [0], [1], [1]] and messages == ["where", "step"] and api.wheres == 3


class TwoQueries(FakeApi):
    _QUERIES = ("where", "there")

    def there(self) -> list[int]:
        self.theres = getattr(self, "theres", 0) + 1
        return [self._steps]


class NoQueries(FakeApi):
    _QUERIES = ()


def test_only_the_queries_code_has_asked_are_answered_ahead():
    """Answering a query nobody reads costs the trainer its time after every step: a worker answers
    ahead only those its code has asked (here `where`, never `there`)."""
    worker = host.Worker()
    try:
        api = TwoQueries()
        result = _run(worker, """
            def act(api):
                api.where()
                api.step()
                api.step()
                return api.where()
        """, api)
        assert result.returned == [2] and api.wheres == 4 and not hasattr(api, "theres")
        assert worker.asked == {"where"}
        api = NoQueries()  # the same worker, an api whose `where` is no query: never answered ahead
        result = _run(worker, "def act(api):\n    api.step()\n    api.step()\n    return api.where()\n", api)
        assert result.returned == [2] and api.wheres == 1
    finally:
        worker.close()


def test_print_output_is_captured_and_bounded(worker):
    result = _run(worker, """
        def act(api):
            for i in range(3000):
                print("line", i, "x" * 10)
            return True
    """)
    assert result.returned is True
    assert result.log[0] == "line 0 xxxxxxxxxx"
    assert sum(len(line) for line in result.log) <= limits.MAX_LOG_CHARS + 100


def test_moderate_recursion_and_sizes_are_allowed(worker):
    result = _run(worker, """
        def depth(n):
            return 0 if n == 0 else 1 + depth(n - 1)

        def act(api):
            cells = [0] * 4096
            text = "ab" * 1000
            small = text.replace("a", "") == "b" * 1000 and 2 ** 60 - 1 + 1 == 2 ** 60
            return depth(100) == 100 and len(cells) == 4096 and small
    """)
    assert (result.returned, result.error) == (True, None)


def test_memory_growth_is_stopped(worker):
    result = _run(worker, """
        def act(api):
            chunks = []
            for i in range(64):  # 512 MB at most, should the memory checks fail
                chunks.append([i] * 1000000)
            return True
    """, time_limit=10.0)
    assert result.stopped == "memory" and result.lineno in (3, 4) and "memory" in result.error


def test_hashing_deeply_nested_tuples_does_not_crash(worker):
    """CPython 3.11 hashes tuples by unguarded C recursion: 180k levels overflow a default 8 MB stack
    (a segfault that would kill this test process), but not the sandbox thread's."""
    result = _run(worker, """
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
    zipped, numbered = guards._zip(a), guards._enumerate(a)
    a.append(3)
    assert list(zipped) == [(1,), (2,)] and list(numbered) == [(0, 1), (1, 2)]


def test_plain_number_arithmetic_skips_the_checks_with_the_same_outcome():
    """guards._numbers, the unchecked path for game arithmetic, gives what the checks then the operation
    give (the result, or the same error) on ints around each limit, floats, bools, strings and lists."""
    values = [0, 1, -7, 2**29, 2**30, -2**30, 2**31, 2**59, 2**60, -2**60, 2**61, 10**20, 0.5, -3.25, 1e300,
              True, "ab", "%s", [1], (3,), None]

    def outcome(fn, *args):
        try:
            return "ok", fn(*args)
        except Exception as e:  # noqa: BLE001 - the error is the outcome compared
            return type(e).__name__, str(e)

    def checked(op, a, b):
        guards._check_arith(op, a, b)
        return guards._OPERATORS[op](a, b)

    def checked_aug(op, current, value):
        guards._check_arith(op, current, value)
        return value

    for op, a, b in itertools.product(guards._OPERATORS, values, values):
        assert outcome(guards._arith, op, a, b) == outcome(checked, op, a, b), (op, a, b)
        assert outcome(guards._aug, op, a, b) == outcome(checked_aug, op, a, b), (op, a, b)
