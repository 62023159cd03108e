"""The worker process that runs code actions: budgets, the model's `api` stub, and the serve loop.

host.Worker starts this file as a fresh interpreter (`python -m sandbox.worker FD PARENT_PID`,
one per env, reused for every call) and talks to it over a socket. The worker never sees the env: the
model's `api` is a stub: a method call is one round trip to the trainer, arguments going out as small
JSON and results coming back as plain data, except a call repeated before the next env step and the
state reads the trainer sends ahead with its replies, which the stub answers itself. Inside, the
model's code runs under the budgets below (an iteration and time budget, a depth limit, a memory
ceiling, print() to a bounded log), checked where checker.compile_action compiled checks into it, in a
thread with a large C stack; its result and its exception text become small plain values in this
process, and whatever it built is freed here too. What these budgets cannot stop (one C call that
runs for minutes, a crash of the interpreter) the trainer stops by killing this process, and the
address-space limit set at start-up turns a runaway allocation into a MemoryError.

Messages: trainer -> worker are pickles (trusted); worker -> trainer are JSON (the trainer must not
unpickle what code it does not trust may have written):
    ("run", source, entry, names, time_limit, cpu_limit)  ->  ["call", name, args, kwargs] ...  ["done", ...]
    ("return", value, *tail) | ("stop", reason, message, *tail) | ("raise", name, message, *tail)  (call replies)
    tail = (same: the call took no env step, host_s: seconds of the trainer's handling of the call less
    its env steps (the only part of a round trip on the code's clock), ahead: None or the replies to
    the api's queries, keyed by request, as host._answers_ahead makes them)
"""

import ctypes
import gc
import json
import linecache
import math
import os
import pickle
import resource
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from time import perf_counter

from sandbox import checker, guards, limits
from sandbox.limits import (
    FILENAME_PREFIX,
    MAX_CALL_CHARS,
    MAX_DEPTH,
    MAX_ITERATIONS,
    MAX_LOG_CHARS,
    MEMORY_LIMIT_MB,
    STACK_MB,
)

ADDRESS_SPACE_MB = 256  # address space the worker may map beyond its start-up size (code stack included)
MAX_RESULT_ITEMS = 10_000  # items in a returned value (only `is True` matters to the env)
MAX_ERROR_CHARS = 500  # an exception's message, as shown to the fast agent
_CACHED_ACTIONS = 64  # compiled code actions kept per worker (a run's action set holds a few dozen)
_STOPS = {cls.reason: cls for cls in limits.Interrupt.__subclasses__()}  # the stops the trainer sends
_ERRORS = {**guards.SAFE_EXCEPTIONS, "AttributeError": AttributeError}
_PAGE_MB = resource.getpagesize() / 2**20


def _memory_mb(field: int) -> float:
    """Field 0 (size) or 1 (resident) of /proc/self/statm, in MB; 0 where there is no /proc."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[field]) * _PAGE_MB
    except OSError:
        return 0.0


class _Run:
    """The budgets and captured output of one call of a code action, and its link to the trainer.
    `tick`, `enter` and `leave` are the checks checker.compile_action put into the model's code."""

    def __init__(self, conn: Connection, time_limit: float, memory_ceiling_mb: float):
        self.conn, self.time_limit, self.deadline = conn, time_limit, perf_counter() + time_limit
        self.memory_ceiling, self.next_memory_check = memory_ceiling_mb, 0.0
        self.depth, self.iterations_left, self.output, self.output_chars = 0, MAX_ITERATIONS, [], 0
        self.answers: dict[bytes, bytes] = {}  # request -> reply: calls answered since the last env step

    def tick(self) -> bool:
        """At every loop iteration and call of the model's code: the iteration, time and memory budgets."""
        self.iterations_left -= 1
        if self.iterations_left < 0:
            raise limits.TimeBudgetExceeded(f"the code made more than {MAX_ITERATIONS} loop iterations and "
                                             "calls of its own functions (an endless loop?)")
        now = perf_counter()
        if now > self.deadline:
            raise limits.TimeBudgetExceeded(f"the code ran for over {self.time_limit} s outside env steps "
                                             "(an endless loop?)")
        if now > self.next_memory_check:  # reading /proc costs ~15 us: once per ms is ~1% overhead
            self.next_memory_check = now + 1e-3
            if _memory_mb(1) > self.memory_ceiling:
                raise limits.MemoryBudgetExceeded(f"the code used more than {MEMORY_LIMIT_MB} MB of memory")
        return True

    def enter(self) -> None:
        """At the entry of each of the model's functions, before its body's `try`: a stop here leaves
        the depth as it was, and every entry that passes is matched by one `leave`."""
        if self.depth >= MAX_DEPTH:
            raise limits.RecursionBudgetExceeded(f"more than {MAX_DEPTH} nested calls")
        self.tick()
        self.depth += 1

    def leave(self) -> None:
        self.depth -= 1

    def call_api(self, name: str, args: tuple, kwargs: dict) -> object:
        """One api call: one round trip to the trainer, unless the same call was answered since the last
        env step (the reply says whether it took one) or answered ahead (host._answers_ahead),
        when the answer is unpickled again: a fresh copy the code may change. Of a round trip the clock
        counts the trainer's handling of the call less its env steps (the reply's `host_s`), not the
        time the call waited while the trainer served other work: the trainer's kill clock does the same
        (host.Job)."""
        request = _encode_call(name, args, kwargs)
        data = self.answers.get(request)
        if data is None:
            sent = perf_counter()
            try:
                self.conn.send_bytes(request)
                data = self.conn.recv_bytes()
            except BaseException:  # noqa: BLE001 - a half-done round trip: the protocol is out of step
                os._exit(3)  # the trainer sees a dead worker, fails this call and starts a fresh one
            reply = pickle.loads(data)
            self.deadline += perf_counter() - sent - reply[-2]  # all of the round trip but the call's handling
        else:
            reply = pickle.loads(data)
        same, _, ahead = reply[-3:]
        if not same:
            self.answers = {}
        self.answers.update(ahead or {})
        if same:
            self.answers[request] = data
        if reply[0] == "return":
            return reply[1]
        if reply[0] == "stop":
            raise _STOPS[reply[1]](reply[2])
        raise _ERRORS.get(reply[1], RuntimeError)(reply[2])

    def write(self, text: str) -> bool:
        """Append to the log; False once it is full (print() then stops formatting)."""
        room = MAX_LOG_CHARS - self.output_chars
        if room > 0:
            self.output.append(text[:room] + (" ...[output truncated]" if len(text) > room else ""))
            self.output_chars += len(text)
        return self.output_chars < MAX_LOG_CHARS


def _encode_call(name: str, args: tuple, kwargs: dict) -> bytes:
    """The call as JSON, refused (TypeError/ValueError in the model's code) unless it is small plain
    data: the trainer formats arguments into error messages, so their size is bounded here, before."""
    budget = [MAX_CALL_CHARS]

    def check(x: object, depth: int) -> None:
        budget[0] -= len(x) if type(x) is str else 4
        if budget[0] < 0 or depth > 8:
            raise ValueError(f"api.{name}() arguments are too large (at most {MAX_CALL_CHARS} characters)")
        if type(x) in (list, tuple):
            for v in x:
                check(v, depth + 1)
        elif type(x) is dict:
            for k, v in x.items():
                if type(k) is not str or k.startswith("_"):
                    raise TypeError(f"api.{name}() takes dicts with string keys (not starting with '_') only")
                check(k, depth + 1)
                check(v, depth + 1)
        elif type(x) not in (type(None), bool, int, float, str):
            raise TypeError(f"api.{name}() takes plain data only (numbers, strings, lists, dicts), "
                            f"not {type(x).__name__}")

    check([args, kwargs], 0)
    return json.dumps(["call", name, args, kwargs]).encode()


class _ApiProxy:
    """What the model's code sees as `api`: the public method names of the real api, read-only."""

    def __init__(self, names: tuple[str, ...], state: _Run):
        object.__setattr__(self, "_names", frozenset(names))
        object.__setattr__(self, "_run", state)

    def __getattr__(self, name: str) -> object:
        if name.startswith("_") or name not in self._names:
            raise AttributeError(f"the api has no method {name!r}")
        state = self._run
        method = lambda *args, **kwargs: state.call_api(name, args, kwargs)  # noqa: E731
        object.__setattr__(self, name, method)  # cached: the next lookup skips __getattr__
        return method

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("the api is read-only")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("the api is read-only")

    def __repr__(self) -> str:
        return "<api>"


def _plain_result(value: object) -> object:
    """A JSON-ready copy of what the code returned: None, bool, int, float, str, list and string-keyed
    dict, at most MAX_RESULT_ITEMS items; anything else is the code's error."""
    count = [0]

    def copy(x: object, depth: int) -> object:
        count[0] += 1 + (len(x) // 100 if type(x) is str else 0)
        if count[0] > MAX_RESULT_ITEMS or depth > 32:
            raise ValueError("the returned value is too large or too deeply nested")
        if type(x) in (type(None), bool, int, float, str):
            return x
        if type(x) in (list, tuple):
            return [copy(v, depth + 1) for v in x]
        if type(x) is dict and all(type(k) is str for k in x):
            return {k: copy(v, depth + 1) for k, v in x.items()}
        raise TypeError(f"only plain data may be returned, not {type(x).__name__}")

    return copy(value, 0)


def _model_line(tb) -> tuple[int | None, str]:
    """The innermost line of the traceback that is in the model's code, and that line's text."""
    lineno, text = None, ""
    for frame, line in traceback.walk_tb(tb):
        if frame.f_code.co_filename.startswith(FILENAME_PREFIX):
            lineno, text = line, linecache.getline(frame.f_code.co_filename, line).strip()
    return lineno, text


def _outcome(value: object, raised: BaseException | None) -> tuple:
    """(returned, error, lineno, stopped) as small plain values."""
    if raised is None:
        try:
            return _plain_result(value), None, None, None
        except (TypeError, ValueError) as e:
            return None, f"{type(e).__name__}: the code action returned it: {e}", None, None
    lineno, text = _model_line(raised.__traceback__)
    where, line = (f"line {lineno}: ", f"\n    {text}") if lineno else ("", "")
    if isinstance(raised, limits.Interrupt):
        if isinstance(raised, limits.StepBudgetExceeded | limits.EpisodeEnded):  # the env's stops
            return None, None, lineno, raised.reason
        return None, f"{where}stopped: {str(raised)[:MAX_ERROR_CHARS]}{line}", lineno, raised.reason
    if isinstance(raised, MemoryError):
        return None, f"{where}stopped: the code ran out of memory (MemoryError){line}", lineno, "memory"
    try:  # the model's own exception: its args may be huge or nested thousands deep
        shown = (guards._str(raised)[:MAX_ERROR_CHARS]
                 if guards._text_size(raised, 10_000) <= 10_000 else "...")
    except Exception:  # noqa: BLE001 - RecursionError, MemoryError, ... while formatting
        shown = "(its message could not be turned into text)"
    return None, f"{where}{type(raised).__name__}: {shown}{line}", lineno, None


def run(fn: Callable, state: _Run, names: tuple[str, ...]) -> list:
    """Call `fn(api)` under the budgets; the "done" message's fields, as small plain values.

    Runs in the calling thread, which must be the code thread (see `serve`): the result is made and
    everything the code built is freed there, on its large stack, before this returns."""
    guards._local.run = state
    fn.__globals__.update(_tick=state.tick, _enter=state.enter, _leave=state.leave)  # this run's checks
    value, raised = None, None
    try:
        value = fn(_ApiProxy(names, state))
    except BaseException as e:  # noqa: BLE001 - reported, never re-raised
        raised = e
    try:
        done = [*_outcome(value, raised), "".join(state.output).splitlines()]
    except BaseException:  # noqa: BLE001 - e.g. MemoryError while making the report
        done = [None, "the code's outcome could not be reported (out of memory?)", None, "memory", []]
    if raised is not None:
        raised.__traceback__ = None  # the frames, and what they hold, go now, not at a later gc
    del value, raised
    gc.collect()  # reference cycles the code made (its frames, its containers)
    return done


def serve(conn: Connection) -> None:
    """Answer "run" requests until the trainer closes the socket. Runs in the code thread (see `main`):
    a run's request, its code, its api calls and its result all happen on one thread, so a run costs
    the worker one wake-up per message it receives and none to hand work between threads."""
    functions: dict[tuple[str, str], Callable | checker.SandboxError] = {}
    gc.freeze()  # start-up objects are never garbage: each run's gc.collect() skips them
    limit = int((_memory_mb(0) + ADDRESS_SPACE_MB) * 2**20)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ValueError, OSError):  # not on every OS; the memory ceiling in _Run still holds
        pass
    baseline = _memory_mb(1)
    conn.send_bytes(b'["ready"]')  # the trainer starts a run's clock only now, not during our start-up
    while True:
        try:
            _, source, entry, names, time_limit, cpu_limit = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):  # the trainer closed the socket, or died (killed) with bytes unread
            return
        if (source, entry) not in functions:
            if len(functions) >= _CACHED_ACTIONS:
                functions.clear()
            try:
                functions[source, entry] = checker.compile_action(source, entry)  # checks again, here
            except checker.SandboxError as e:
                functions[source, entry] = e
        fn = functions[source, entry]
        if isinstance(fn, checker.SandboxError):
            done = [None, str(fn), fn.lineno, None, []]
        else:
            _limit_cpu(cpu_limit)
            done = run(fn, _Run(conn, time_limit, baseline + MEMORY_LIMIT_MB), names)
        exiting = _memory_mb(1) > baseline + MEMORY_LIMIT_MB / 2  # memory kept across calls: start afresh
        conn.send_bytes(json.dumps(["done", *done, exiting]).encode())
        if exiting:
            return


def _limit_cpu(seconds: float) -> None:
    """SIGXCPU (which ends the process) once this run has used `seconds` more CPU time: the bound for a
    trainer that cannot kill (stopped, or dead and the parent-death signal unavailable) while the code is
    inside one C call. The trainer's kill usually comes first, but its clock for this run skips the time it
    spends on other envs and jobs, while this process's CPU time runs on; the trainer then reports the
    SIGXCPU as the time budget (host.Worker._failed)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + seconds)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.getrlimit(resource.RLIMIT_CPU)[1]))
    except (ValueError, OSError):  # a hard limit below it: that one holds
        pass


def _die_with(parent: int) -> None:
    """Have the kernel SIGKILL this process when the trainer (the thread that started it) ends, whatever
    this process is doing: one C call can hold the interpreter for minutes, so no Python code of ours
    could notice in time. Linux only; elsewhere the per-run CPU limit and the socket's EOF remain."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the trainer died before the signal was armed
        os._exit(0)


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def main(fd: int, parent: int) -> None:
    """Serve on the code thread: its large C stack (see limits.STACK_MB) holds what recurses in C
    (hashing nested tuples, freeing long chains of objects). Made before the address-space limit, so
    that limit is left for the code's data."""
    _die_with(parent)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU dumps core by default: not here
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the trainer's to handle (it kills us)
    previous = threading.stack_size(STACK_MB * 2**20)
    try:
        thread = threading.Thread(target=serve, args=(Connection(fd),), name="sandbox")
        thread.start()
    finally:
        threading.stack_size(previous)
    thread.join()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
