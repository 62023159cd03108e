"""The trainer's side of the sandbox: a worker process per env that runs code actions, killed and
replaced whenever the code overruns its budget or crashes it.

    worker = Worker()                                            # starts on the first run
    result = worker.run(source, "chop_tree", api, time_limit=1.0)
    jobs = [w.start(src, entry, api) for w, api in ...]          # several workers at once:
    serve(jobs)                                                  # each job.result set
    worker.close()

`run` (or `start`) sends the source to the worker (worker.py, run as `python -m sandbox.worker` from the
repository's root: a fresh interpreter as multiprocessing's "spawn" makes one: no fork of a trainer that holds
torch threads; started with subprocess because gymnasium's async vector-env workers are daemonic, and
multiprocessing refuses them children; ~0.2 s, once per env, see bench/sandbox_proxy.py), then serves the
code's api calls: each is one round trip, its arguments small JSON checked again here, the real api called in
this process and its result sent back as plain data. The env never leaves the trainer, nor does the trainer's
environment (its keys): the worker gets only MALLOC_ARENA_MAX.

An api call that took no env step (`api._steps` unchanged, as core.PrimitiveAPI counts them) changed
nothing: the worker answers the same call again itself until the next step (a skill asks view() and
inventory() many times between two moves), so a run makes fewer round trips. The calls an api class
names in `_QUERIES` (no arguments, reading the env's state only) are answered ahead: once code on a
worker has asked one, the reply to every call that took a step (and to the first query of a run)
carries its answer, so reading the state costs no round trip after a step. An api without `_steps`
gets none of this.

The code's clock is its own time: its worker's, and the trainer's handling of its api calls less the
env steps they took (`api._env_time`, which core.PrimitiveAPI keeps), never the time the trainer spent
on other jobs meanwhile (see Job): env steps are bounded by the step budget, everything else (the
code, api calls that take no step, failing ones) by `time_limit`, so no count of api calls has to fit
the machine's load. The wait is bounded from outside: once that clock passes `time_limit +
KILL_AFTER_S`, the worker is killed. A killed or crashed worker fails that one code action with a reason
in RunResult.error; the next run starts a fresh worker. Should the trainer itself die (SIGKILL, the OOM
killer), the operating system ends the worker: a parent-death signal, and a CPU-time limit per run (see
worker.main), since a worker inside one long C call runs none of its own Python.
"""

import functools
import json
import os
import pickle
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import weakref
from multiprocessing.connection import Connection
from pathlib import Path
from time import perf_counter

import numpy as np

from sandbox import limits
from sandbox.guards import SAFE_EXCEPTIONS
from sandbox.limits import MAX_CALL_CHARS, MAX_LOG_CHARS, MAX_PLAIN_ITEMS, RunResult

START_TIMEOUT_S = 30.0  # a fresh worker that has not said "ready" by then counts as crashed
KILL_AFTER_S = 0.5  # grace past the time limit before the worker is killed (its own budget stops loops)
MAX_MESSAGE_BYTES = 1_000_000  # longest message the trainer reads from the worker
MAX_ERROR_CHARS = 2_000
_ROOT = str(Path(__file__).resolve().parents[1])  # the worker runs as `python -m sandbox.worker` from here
_STOPS = {cls.reason for cls in limits.Interrupt.__subclasses__()}
_ERRORS = {*SAFE_EXCEPTIONS, "AttributeError"}


class Worker:
    """One worker process, started on the first `run` and reused; `.starts` counts (re)starts."""

    def __init__(self):
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._poll: select.poll | None = None  # made once per worker: Connection.poll makes one per call
        self.starts = 0
        self._finalizer = None
        self.asked: set[str] = set()  # the api's queries code on this worker has asked: answered ahead

    def run(self, source: str, entry: str, api: object, *, time_limit: float = limits.TIME_LIMIT_S) -> RunResult:
        """Run `entry(api)` from `source` in the worker; never raises for anything the code does.
        An interrupt of the trainer (Ctrl-C) kills the worker and is raised again."""
        job = self.start(source, entry, api, time_limit=time_limit)
        serve([job])
        return job.result

    def start(self, source: str, entry: str, api: object, *, time_limit: float = limits.TIME_LIMIT_S) -> "Job":
        """Start `entry(api)` in the worker and return at once: `serve` answers its api calls (several
        workers' at a time) until the job's `result` is set."""
        names = public_methods(api)
        job = Job(self, api, set(names), time_limit)
        try:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            cpu_limit = time_limit + KILL_AFTER_S + 1.0  # the kill mostly comes first; see _failed
            self._conn.send_bytes(pickle.dumps(("run", source, entry, names, time_limit, cpu_limit)))
        except OSError:  # the socket broke: the worker died before reading, or did not start
            job.result = self._failed()
        except BaseException:
            self.close()
            raise
        return job

    def _start(self) -> None:
        """A fresh interpreter on a socket pair, in its own session (so Ctrl-C reaches only the
        trainer), with one malloc arena (so its address-space limit counts what it allocates)."""
        self.close()
        ours, theirs = socket.socketpair()
        with theirs:
            self._proc = _spawn(
                [sys.executable, "-E", "-s", "-m", "sandbox.worker", str(theirs.fileno()), str(os.getpid())],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                start_new_session=True, cwd=_ROOT, env={"MALLOC_ARENA_MAX": "1"})
        self._conn = Connection(ours.detach())
        self._poll = select.poll()
        self._poll.register(self._conn.fileno(), select.POLLIN)
        self._finalizer = weakref.finalize(self, _stop, self._proc, self._conn)
        self.starts += 1
        # wait for its "ready", so that its start-up (a fresh interpreter's imports) is never charged to the
        # first run's time budget; a worker that does not come up is an OSError: that run fails, not training
        try:
            ready = self._poll.poll(START_TIMEOUT_S * 1e3) and self._conn.recv_bytes(64) == b'["ready"]'
        except (EOFError, OSError):
            ready = False
        if not ready:
            raise OSError("the sandbox worker process did not start")

    def _failed(self, what: str = "") -> RunResult:
        """The worker died (or misbehaved) during this run: report it, and start afresh next time."""
        proc = self._proc
        self.close()
        status = proc.returncode if proc is not None else None
        if status == -signal.SIGXCPU:  # its per-run CPU limit: the job's clock skips the trainer's other work
            return RunResult(None, "stopped: the code ran past its time budget inside one operation (its worker "
                             "process was ended by its CPU-time limit)", None, "time_budget", [])
        if what:
            reason = f"its worker process {what}"
        elif status is not None and status < 0:
            reason = f"it crashed its worker process ({signal.Signals(-status).name})"
        else:
            reason = f"it crashed its worker process (exit status {status})"
        return RunResult(None, f"stopped: {reason}", None, "crashed", [])

    def close(self) -> None:
        """Kill the worker, if any; the next `run` starts a new one."""
        if self._finalizer is not None:
            self._finalizer()
        self._proc = self._conn = self._poll = self._finalizer = None


class Job:
    """One run of code in a worker, from `Worker.start` until `result` is set (by `serve`).

    Its clock is the time the trainer spent waiting on its worker (in `serve`, while the code had the
    turn) and the trainer's handling of its calls less the env steps they took: so the time the trainer
    spends on other jobs or other envs meanwhile is never charged to it, however many run beside it.
    The worker's own clock agrees: each reply says how much of its round trip was the trainer's
    handling (`host_s`), and the rest of the round trip is not the code's time."""

    waited = 0.0  # seconds this process has spent waiting on workers in `serve`, all jobs together

    def __init__(self, worker: Worker, api: object, names: set[str], time_limit: float):
        self.worker, self.api, self.names, self.time_limit = worker, api, names, time_limit
        self.queries, self.answered = frozenset(getattr(type(api), "_QUERIES", ())), False
        self.charged, self.turn_from = 0.0, Job.waited  # its turn began at this `waited`
        self.seen: float | None = None  # `waited` when serve first saw its message ready
        self.result: RunResult | None = None

    def left(self) -> float:
        """Seconds of its clock before the kill (constant while its message waits to be read)."""
        turn = (Job.waited if self.seen is None else self.seen) - self.turn_from
        return self.time_limit + KILL_AFTER_S - self.charged - turn

    def kill(self) -> None:
        self.worker.close()
        self.result = RunResult(None, f"stopped: the code ran past its time budget of {self.time_limit} s inside "
                                "one operation (its worker process was killed)", None, "time_budget", [])

    def handle(self) -> None:
        """Read the worker's waiting message: answer an api call, or take the run's outcome."""
        begun = perf_counter()
        self.charged += self.seen - self.turn_from
        worker, api = self.worker, self.api
        try:
            data = worker._conn.recv_bytes(MAX_MESSAGE_BYTES)
            message = json.loads(data)
        except (EOFError, OSError):
            self.result = worker._failed()
            return
        except (ValueError, RecursionError):  # not the JSON this protocol sends
            self.result = worker._failed("sent a malformed message")
            return
        if _is_call(message, self.names) and len(data) <= 6 * MAX_CALL_CHARS + 200:  # JSON escapes: 6 a char
            steps, before = getattr(api, "_steps", None), getattr(api, "_env_time", 0.0)
            reply = _call(api, *message[1:])
            stepped = getattr(api, "_env_time", 0.0) - before
            same = steps is not None and getattr(api, "_steps", None) == steps  # no env step: nothing changed
            query = message[1] in self.queries and not message[2] and not message[3]
            if query:
                worker.asked.add(message[1])
            ahead = None
            if reply[0] != "stop" and (not same or query and not self.answered):  # the state is new to the worker
                ahead = _answers_ahead(api, worker.asked & self.queries)  # this api's, asked on this worker
            self.answered = ahead is not None or same and self.answered
            host_s = perf_counter() - begun - stepped  # the call's handling, on the code's clock
            try:
                worker._conn.send_bytes(pickle.dumps((*reply, same, host_s, ahead)))
            except OSError:
                self.result = worker._failed()
                return
            self.charged += host_s
            self.turn_from, self.seen = Job.waited, None
        elif _is_done(message):
            returned, error, lineno, stopped, log, exiting = message[1:]
            if exiting:
                worker.close()
            self.result = RunResult(returned, error[:MAX_ERROR_CHARS] if error else None, lineno, stopped,
                                    _bounded_log(log))
        else:
            self.result = worker._failed("sent a malformed message")


def serve(jobs: list[Job], *, wait: bool = True) -> None:
    """Answer the jobs' api calls as their workers send them, until every job has its result (`wait`), or
    once for the messages waiting now (not `wait`: between other work, see env.CodeActionVectorEnv). A
    worker that overruns its job's clock is killed. An interrupt (Ctrl-C) kills the unfinished jobs'
    workers and is raised again."""
    live = {job.worker._conn.fileno(): job for job in jobs if job.result is None}
    own = len(live) > 1  # one job: its worker's poll object; more: one for them all
    poll = select.poll() if own else next(iter(live.values())).worker._poll if live else None
    for fd in live if own else ():
        poll.register(fd, select.POLLIN)

    def drop(fd: int) -> None:
        del live[fd]
        if own:
            poll.unregister(fd)

    try:
        while live:
            for fd, job in list(live.items()):
                if job.seen is None and job.left() <= 0:
                    drop(fd)
                    job.kill()
            running = [job.left() for job in live.values() if job.seen is None]
            timeout = max(min(running), 0.0) if wait and running else 0.0
            begun = perf_counter()
            ready = poll.poll(timeout * 1e3) if live else []
            Job.waited += perf_counter() - begun
            for fd, _ in ready:
                if live[fd].seen is None:
                    live[fd].seen = Job.waited
            for fd, _ in ready:
                job = live[fd]
                job.handle()
                if job.result is not None:
                    drop(fd)
            if not wait:
                return
    except BaseException:
        for job in live.values():
            job.worker.close()
        raise


_spawns: queue.SimpleQueue | None = None  # Popen requests for the spawner thread, made on first need
_spawns_lock = threading.Lock()


def _spawn(args: list[str], **kwargs) -> subprocess.Popen:
    """Popen from a thread that lives as long as this process: the worker's parent-death signal fires
    when the thread that started it ends, and a worker started by a short-lived thread (a thread pool's)
    would die with it. The main thread qualifies; any other thread hands the start to a daemon thread."""
    global _spawns
    if threading.current_thread() is threading.main_thread():
        return subprocess.Popen(args, **kwargs)
    with _spawns_lock:
        if _spawns is None:
            _spawns = queue.SimpleQueue()
            threading.Thread(target=_spawner, args=(_spawns,), name="sandbox-spawner", daemon=True).start()
    done: queue.SimpleQueue = queue.SimpleQueue()
    _spawns.put((args, kwargs, done))
    proc = done.get()
    if isinstance(proc, BaseException):
        raise proc
    return proc


def _spawner(requests: queue.SimpleQueue) -> None:
    while True:
        args, kwargs, done = requests.get()
        try:
            done.put(subprocess.Popen(args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - handed to the thread that asked
            done.put(e)


def _stop(proc: subprocess.Popen, conn: Connection) -> None:
    conn.close()
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def public_methods(api: object) -> tuple[str, ...]:
    """The names model code may call: the public methods of the api's class."""
    return _public_methods(type(api))


@functools.cache
def _public_methods(kind: type) -> tuple[str, ...]:  # dir() of a class: ~20 us, once per run otherwise
    return tuple(n for n in dir(kind) if not n.startswith("_") and callable(getattr(kind, n)))


def _answers_ahead(api: object, names: set[str]) -> dict[bytes, bytes]:
    """The replies to these queries of the api, keyed by the request the worker would send for each."""
    return {_query_key(name): pickle.dumps((*_call(api, name, [], {}), True, 0.0, None)) for name in names}


@functools.cache
def _query_key(name: str) -> bytes:
    """The bytes the worker sends for `api.<name>()` (worker._encode_call)."""
    return json.dumps(["call", name, [], {}]).encode()


def _is_call(message: object, names: set[str]) -> bool:
    return (isinstance(message, list) and len(message) == 4 and message[0] == "call" and message[1] in names
            and isinstance(message[2], list) and isinstance(message[3], dict)
            and not any(k.startswith("_") for k in message[3]))


def _is_done(message: object) -> bool:
    if not (isinstance(message, list) and len(message) == 7 and message[0] == "done"):
        return False
    _, _, error, lineno, stopped, log, exiting = message
    return (isinstance(error, str | None) and isinstance(lineno, int | None) and stopped in (*_STOPS, None)
            and isinstance(log, list) and all(isinstance(line, str) for line in log)
            and isinstance(exiting, bool))


def _bounded_log(log: list[str]) -> list[str]:
    kept, room = [], MAX_LOG_CHARS + 100
    for line in log:
        if room <= 0:
            break
        kept.append(line[:room])
        room -= len(kept[-1]) + 1
    return kept


def _call(api: object, name: str, args: list, kwargs: dict) -> tuple:
    """One api call for the worker: ("return", plain value) | ("stop", reason, text) | ("raise", name, text).
    The api's exceptions travel as their type's name and message only (their args could hold env
    objects); types the model may not know become RuntimeError."""
    try:
        value = getattr(api, name)(*args, **kwargs)
    except limits.Interrupt as e:
        return "stop", e.reason, str(e)[:500]
    except Exception as e:  # noqa: BLE001 - the model's bad arguments, or the api's own errors
        kind, message = type(e).__name__, str(e)[:500]
        return ("raise", kind, message) if kind in _ERRORS else ("raise", "RuntimeError", f"{kind}: {message}")
    try:
        return "return", _plain(value)
    except (TypeError, ValueError) as e:
        return "raise", type(e).__name__, str(e)


_SCALARS = frozenset({type(None), bool, int, float, str})


def _plain(value: object) -> object:
    """A copy of `value` made of None, bool, int, float, str, list, tuple and dict only."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind in (tuple, list) and len(value) < 16 and all(type(v) in _SCALARS for v in value):
        return kind(value)  # the common small case (positions), without the walk below
    if kind is list and len(value) < 16 and all(type(row) is list and len(row) < 16 and all(
            type(v) in _SCALARS for v in row) for row in value):
        return [list(row) for row in value]  # a small grid (Crafter's view), a third of the walk's time
    count = 0

    def copy(x, depth):
        nonlocal count
        count += 1
        if count > MAX_PLAIN_ITEMS or depth > 32:
            raise ValueError("value too large or too deeply nested to pass the api boundary")
        if type(x) in _SCALARS:
            return x
        if type(x) in (list, tuple):
            return type(x)(copy(v, depth + 1) for v in x)
        if type(x) is dict:
            return {copy(k, depth + 1): copy(v, depth + 1) for k, v in x.items()}
        if isinstance(x, np.ndarray | np.generic) and x.size <= MAX_PLAIN_ITEMS:
            return copy(x.tolist(), depth)
        for kind in (bool, int, float, str):  # enums and other subclasses become the plain type
            if isinstance(x, kind):
                return kind(x)
        raise TypeError(f"only plain data may pass the api boundary, not {type(x).__name__}")

    return copy(value, 0)
