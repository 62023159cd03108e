"""The sandbox for LLM-written code actions: an AST allowlist, restricted builtins and run budgets.

A code action is source text defining one entry function `def <entry>(api):` (plus small helper
functions) that drives the environment through the primitive API and returns True on success. The
text is untrusted, so it passes three layers:

1. `check` walks an allowlist of syntax: no imports, no `_` names, no dunder or frame attributes, no
   introspection builtins, no classes, `global`, `with` or `finally`, and `except` may only name the
   builtin Exception subclasses, so a stop (an `Interrupt`, a BaseException) can never be swallowed.
2. `compile_action` rewrites the operations that can blow up inside one C call (`*`, `**`, `<<`, `+`,
   `-`, `%`, `str.join`/`replace`, f-string fields) into size-checked helpers and runs the module with
   restricted builtins (`range`, `str`, `int`, `zip`, ... wrapped to refuse huge inputs or results).
3. `run` calls the entry function with a read-only proxy of the api under `sys.settrace`: a time
   and a line budget for the model's own code (the clock stops inside api calls, which are capped
   in number instead), a depth limit for recursion and a memory limit, in a thread of its own with a
   large C stack; print() goes to `RunResult.log`.

    fn = compile_action(source, "chop_tree")   # raises SandboxError(message, lineno)
    result = run(fn, api, time_limit=1.0)       # never raises for anything the code does

Not bounded: a single builtin C call over containers the code already built runs to its end before
the next line check. Sizes are capped (MAX_LEN, MAX_INT, the memory limit), but their product is not:
`b in [a] * 10**6`, with `a` and `b` distinct equal strings of 10**6 characters, compares for minutes.
That costs time, not memory; the budgets cannot cut it short.
"""

import ast
import copy
import itertools
import linecache
import operator
import re
import resource
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter

import numpy as np

MAX_SOURCE_CHARS = 20_000  # a code action is a short function, not a program
MAX_LEN = 1_000_000  # longest str/list/tuple/range one operation may build, or a builtin may consume
# Largest |int| the code may build. From 2**61 - 1 on, ints share hashes (hash(x) is x mod 2**61 - 1),
# and a set of a few thousand colliding ints takes seconds of quadratic work in one C call.
MAX_INT = 2**60
MAX_DEPTH = 200  # nested calls of the model's own functions
MAX_LINES = 50_000  # lines of the model's own code per run: a deterministic bound on its work
MEMORY_LIMIT_MB = 128  # resident memory the model's code may add during one run
# C stack of the thread running model code. CPython 3.11 hashes nested tuples by unguarded C recursion,
# ~64 bytes a level; the memory limit allows ~2.4M levels of 56-byte tuples, which need ~150 MB
# (a default 8 MB stack segfaults past ~120k levels). Only the pages touched are ever used.
STACK_MB = 256
MAX_LOG_CHARS = 10_000  # print() output kept per run
MAX_PLAIN_ITEMS = 100_000  # items in one value crossing the api boundary
MAX_API_CALLS = 10_000  # api calls per run: they are off the clock, so `while api.view(): pass` needs a cap
FILENAME_PREFIX = "<llm:"  # code objects compiled from model source; only these are traced


class SandboxError(Exception):
    """Code rejected by the checker (or failed to compile). .lineno: line in the model's code, or None."""

    def __init__(self, message: str, lineno: int | None = None):
        super().__init__(f"line {lineno}: {message}" if lineno else message)
        self.message, self.lineno = message, lineno


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
    """The model's own code ran past its time budget (api calls excluded) or its line budget."""
    reason = "time_budget"


class MemoryBudgetExceeded(Interrupt):
    reason = "memory"


class RecursionBudgetExceeded(Interrupt):
    reason = "recursion"


class ApiCallBudgetExceeded(Interrupt):
    reason = "api_calls"


# ----------------------------------------------------------------------------------------------
# check: the syntax allowlist

_ALLOWED_NODES = (
    ast.Module, ast.FunctionDef, ast.arguments, ast.arg, ast.Return, ast.Delete, ast.Assign, ast.AugAssign,
    ast.AnnAssign, ast.For, ast.While, ast.If, ast.Raise, ast.Try, ast.ExceptHandler, ast.Assert, ast.Expr,
    ast.Pass, ast.Break, ast.Continue, ast.BoolOp, ast.NamedExpr, ast.BinOp, ast.UnaryOp, ast.Lambda,
    ast.IfExp, ast.Dict, ast.Set, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
    ast.comprehension, ast.Compare, ast.Call, ast.keyword, ast.FormattedValue, ast.JoinedStr, ast.Constant,
    ast.Attribute, ast.Subscript, ast.Starred, ast.Name, ast.List, ast.Tuple, ast.Slice, ast.expr_context,
    ast.operator, ast.boolop, ast.unaryop, ast.cmpop,
)
SAFE_EXCEPTIONS = {e.__name__: e for e in (Exception, ValueError, KeyError, IndexError, TypeError,
                                           RuntimeError, ZeroDivisionError)}
_FORBIDDEN_NAMES = {"exec", "eval", "compile", "open", "getattr", "setattr", "delattr", "globals", "locals",
                    "vars", "dir", "input", "breakpoint", "help", "type", "object", "super", "memoryview",
                    "exit", "quit"}
# format/format_map reach attributes through "{0.x}"; mro() reaches BaseException; gi_/f_/tb_/co_ reach
# frames and their globals; the rest build huge strings or ints from small inputs in one C call.
_DENIED_ATTRS = {"format", "format_map", "mro", "with_traceback", "encode", "to_bytes", "translate",
                 "center", "ljust", "rjust", "zfill", "expandtabs", "from_bytes", "as_integer_ratio"}
_DENIED_PREFIXES = ("gi_", "ag_", "cr_", "f_", "tb_", "co_")
_MAX_FSTRING_FIELDS = 20


def check(source: str, entry: str) -> None:
    """Raise SandboxError(message, lineno) unless `source` is one `def entry(api):` plus small helpers
    written in the allowed subset of Python."""
    _parse(source, entry)


def _parse(source: str, entry: str) -> ast.Module:
    if not isinstance(source, str) or len(source) > MAX_SOURCE_CHARS:
        raise SandboxError(f"the code must be a string of at most {MAX_SOURCE_CHARS} characters")
    if not entry.isidentifier() or entry.startswith("_") or entry in _BUILTINS or entry in _FORBIDDEN_NAMES:
        raise SandboxError(f"{entry!r} cannot be the name of a code action")
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise SandboxError(f"SyntaxError: {e.msg}", e.lineno) from None
    except (ValueError, RecursionError, MemoryError) as e:
        raise SandboxError(f"the code cannot be parsed: {e}") from None
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0].value, "value", None), str):
        body = body[1:]  # a module docstring
    for stmt in body:
        if not isinstance(stmt, ast.FunctionDef):
            raise SandboxError("only function definitions may appear at the top level", stmt.lineno)
    entries = [stmt for stmt in body if stmt.name == entry]
    if len(entries) != 1:
        raise SandboxError(f"define exactly one function `def {entry}(api):`")
    a = entries[0].args
    if len(a.args) != 1 or a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg or a.defaults:
        raise SandboxError(f"the entry function must take exactly one argument: `def {entry}(api):`",
                           entries[0].lineno)
    for node in ast.walk(tree):
        _check_node(node)
    return tree


def _check_node(node: ast.AST) -> None:
    lineno = getattr(node, "lineno", None)

    def reject(message: str) -> None:
        raise SandboxError(message, lineno)

    if not isinstance(node, _ALLOWED_NODES):
        reject(f"{type(node).__name__} is not allowed in code actions")
    if isinstance(node, ast.Name):
        _check_identifier(node.id, binding=not isinstance(node.ctx, ast.Load), lineno=lineno)
    elif isinstance(node, ast.Attribute):
        if node.attr.startswith("_") or node.attr in _DENIED_ATTRS or node.attr.startswith(_DENIED_PREFIXES):
            reject(f"the attribute .{node.attr} is not allowed")
        if not isinstance(node.ctx, ast.Load):
            reject("assigning or deleting attributes is not allowed (the api is read-only)")
    elif isinstance(node, ast.FunctionDef | ast.Lambda):
        if isinstance(node, ast.FunctionDef):
            _check_identifier(node.name, binding=True, lineno=lineno)
            if node.decorator_list:
                reject("decorators are not allowed")
        defaults = node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
        if not all(isinstance(d, ast.Constant) for d in defaults):  # defaults run at definition time
            reject("default argument values must be plain constants")
    elif isinstance(node, ast.arg):
        _check_identifier(node.arg, binding=True, lineno=lineno)
    elif isinstance(node, ast.keyword) and node.arg and node.arg.startswith("_"):
        reject(f"keyword names starting with '_' are not allowed ({node.arg})")
    elif isinstance(node, ast.ExceptHandler):
        kinds = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
        if not all(isinstance(k, ast.Name) and k.id in SAFE_EXCEPTIONS for k in kinds):
            reject(f"`except` must name built-in exceptions ({', '.join(SAFE_EXCEPTIONS)})")
        if node.name:
            _check_identifier(node.name, binding=True, lineno=lineno)
    elif isinstance(node, ast.Try) and node.finalbody:
        reject("`finally` is not allowed")
    elif isinstance(node, ast.Constant) and isinstance(node.value, bytes):
        reject("bytes literals are not allowed")
    elif isinstance(node, ast.Constant) and isinstance(node.value, int) and abs(node.value) > MAX_INT:
        reject("integer literals beyond +-2**60 are not allowed")
    elif isinstance(node, ast.JoinedStr):
        if sum(isinstance(v, ast.FormattedValue) for v in node.values) > _MAX_FSTRING_FIELDS:
            reject(f"an f-string may have at most {_MAX_FSTRING_FIELDS} fields")
    elif isinstance(node, ast.FormattedValue) and node.format_spec is not None:
        spec = node.format_spec.values
        if not all(isinstance(v, ast.Constant) for v in spec) or re.search(r"\d{4}", "".join(
                str(v.value) for v in spec)):
            reject("f-string format specs must be constants with widths below 1000")
    elif isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Call):
        items = node.args if isinstance(node, ast.Call) else node.elts
        if sum(isinstance(item, ast.Starred) for item in items) > 1:
            reject("at most one *unpacking per call or display")


def _check_identifier(name: str, binding: bool, lineno: int | None) -> None:
    if name.startswith("_") and name != "_":
        raise SandboxError(f"names starting with '_' are not allowed ({name})", lineno)
    if name in _FORBIDDEN_NAMES:
        raise SandboxError(f"{name!r} is not available in code actions", lineno)
    if binding and name in _BUILTINS:
        raise SandboxError(f"do not rebind the built-in name {name!r}", lineno)


# ----------------------------------------------------------------------------------------------
# compile_action: size guards and restricted builtins


def _check_size(n: int, what: str) -> None:
    if n > MAX_LEN:
        raise ValueError(f"{what} of length {n} is too large (the limit is {MAX_LEN})")


def _check_arith(op: str, a: object, b: object) -> None:
    """Refuse `a op b` before CPython builds a huge result in one uninterruptible C call."""
    if op == "%" and isinstance(a, str):
        raise TypeError("%-formatting is not allowed in code actions; use an f-string")
    seq = (str, list, tuple)
    if op == "*" and isinstance(a, seq) and isinstance(b, int):
        _check_size(len(a) * b, "repeated sequence")
    elif op == "*" and isinstance(b, seq) and isinstance(a, int):
        _check_size(len(b) * a, "repeated sequence")
    elif op == "+" and isinstance(a, seq) and isinstance(b, seq):
        _check_size(len(a) + len(b), "concatenated sequence")
    elif isinstance(a, int) and isinstance(b, int):
        bits = {"*": a.bit_length() + b.bit_length() - 1,  # lower bounds on the result's bit length
                "**": (a.bit_length() - 1) * b if b > 0 else 0,
                "<<": a.bit_length() + b if a else 0}.get(op, 0)
        _small(MAX_INT * 2 if bits > 61 else _OPERATORS[op](a, b))  # so 10 ** 10 ** 10 never runs


def _small(x: object) -> object:
    if isinstance(x, int) and not -MAX_INT <= x <= MAX_INT:
        raise ValueError("integer results beyond +-2**60 are not allowed in code actions")
    return x


_OPERATORS = {"*": operator.mul, "**": operator.pow, "<<": operator.lshift, "+": operator.add,
              "-": operator.sub, "%": operator.mod}


def _arith(op: str, a: object, b: object) -> object:
    _check_arith(op, a, b)
    return _OPERATORS[op](a, b)


def _aug(op: str, current: object, value: object) -> object:
    """`x op= v` keeps its in-place semantics; only the size is checked first."""
    _check_arith(op, current, value)
    return value


def _sized_method(obj: object, name: str) -> Callable:
    """`s.join(parts)` and `s.replace(old, new)` with their output length checked before the C call."""
    method = getattr(obj, name)
    if not isinstance(obj, str):
        return method

    def sized(*args):
        if name == "join" and len(args) == 1:
            args = (list(args[0]),)
            strings = [len(p) for p in args[0] if isinstance(p, str)]
            _check_size(sum(strings) + len(obj) * max(len(args[0]) - 1, 0), "joined string")
        elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
            count = obj.count(args[0]) if len(args) == 2 or args[2] < 0 else min(args[2], obj.count(args[0]))
            _check_size(len(obj) + count * (len(args[1]) - len(args[0])), "replaced string")
        return method(*args)

    return sized


def _text_size(value: object, limit: int) -> int:
    """An upper estimate of len(str(value)) that stops once it passes `limit`: str() of a list holding
    one big string a million times is built in a single C call, so it must be refused up front."""
    total, stack = 0, [iter((value,))]
    while stack and total <= limit:
        x = next(stack[-1], stack)  # the stack itself marks an exhausted iterator
        if x is stack:
            stack.pop()
        elif isinstance(x, str):
            total += len(x) + 2
        elif isinstance(x, list | tuple | set | frozenset | dict):
            total += 2 + 2 * len(x)
            stack.append(iter(x.items() if isinstance(x, dict) else x))
        elif isinstance(x, BaseException):
            total += 40
            stack.append(iter(x.args))
        else:
            total += x.bit_length() // 3 + 2 if isinstance(x, int) else 100
    return total


def _text(value: object) -> object:
    if _text_size(value, MAX_LEN) > MAX_LEN:
        raise ValueError("value too large to turn into text")
    return value


def _str(value: object = "") -> str:
    return str(_text(value))


def _range(*args: int) -> range:
    r = range(*args)
    _check_size(len(r), "range")
    _small(r.start)
    _small(r.stop)
    return r


def _int(value: object = 0, *base: int) -> int:
    return _small(int(value, *base))


def _round(number: float, ndigits: int | None = None) -> float:
    return _small(round(number, ndigits))


def _sum(iterable, start=0):
    if not isinstance(start, int | float):  # sum(lists, []) is quadratic and unbounded
        raise TypeError("sum() start must be a number")
    return _small(sum(iterable, start))


def _consumable(iterable: object, what: str) -> object:
    """Size-checked, and lists copied: `a.extend(zip(a))` would otherwise grow `a` forever in C."""
    if isinstance(iterable, str | list | tuple | dict | set | range):
        _check_size(len(iterable), what)
    return tuple(iterable) if isinstance(iterable, list) else iterable


def _zip(*iterables):
    if len(iterables) > 16:
        raise ValueError("zip() of more than 16 iterables")
    return zip(*(_consumable(it, "zip() argument") for it in iterables))  # noqa: B905 - plain zip()


def _enumerate(iterable, start=0):
    return enumerate(_consumable(iterable, "enumerate() argument"), _small(start))


def _print(*args: object, sep: str = " ", end: str = "\n") -> None:
    _text((args, sep, end))
    _current().write(str(sep).join(str(a) for a in args) + str(end))


def _isinstance(obj: object, kinds) -> bool:
    """isinstance() that understands the wrapped `str`, `int`, `range`, `zip` and `enumerate`."""
    if isinstance(kinds, tuple):
        return isinstance(obj, tuple(_WRAPPED_TYPES.get(k, k) for k in kinds))
    return isinstance(obj, _WRAPPED_TYPES.get(kinds, kinds))


_WRAPPED_TYPES = {_str: str, _int: int, _range: range, _zip: zip, _enumerate: enumerate}
_BUILTINS = {
    "range": _range, "len": len, "min": min, "max": max, "abs": abs, "sum": _sum, "any": any, "all": all,
    "enumerate": _enumerate, "zip": _zip, "sorted": sorted, "reversed": reversed, "list": list,
    "dict": dict, "set": set, "tuple": tuple, "int": _int, "float": float, "bool": bool, "str": _str,
    "isinstance": _isinstance, "round": _round, "print": _print, **SAFE_EXCEPTIONS,
}
_HELPERS = {"_arith": _arith, "_aug": _aug, "_sized_method": _sized_method, "_text": _text}
_GUARDED_OPS = {ast.Mult: "*", ast.Pow: "**", ast.LShift: "<<", ast.Add: "+", ast.Sub: "-", ast.Mod: "%"}


class _Guard(ast.NodeTransformer):
    """Routes the size-amplifying operations through the helpers above and drops annotations
    (they would be evaluated at definition time, outside any budget)."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        op = _GUARDED_OPS.get(type(node.op))
        return node if op is None else _call("_arith", node, ast.Constant(op), node.left, node.right)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        op = _GUARDED_OPS.get(type(node.op))
        if op is not None:  # the target's subexpressions are evaluated twice; harmless for game code
            current = copy.deepcopy(node.target)
            current.ctx = ast.Load()
            node.value = _call("_aug", node, ast.Constant(op), current, node.value)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if node.attr in ("join", "replace"):
            return _call("_sized_method", node, node.value, ast.Constant(node.attr))
        return node

    def visit_FormattedValue(self, node: ast.FormattedValue) -> ast.AST:
        self.generic_visit(node)
        node.value = _call("_text", node.value, node.value)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.annotation = None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        node.returns = None
        return node


def _call(helper: str, where: ast.AST, *args: ast.expr) -> ast.Call:
    return ast.copy_location(ast.Call(ast.Name(helper, ast.Load()), list(args), []), where)


_compiled = itertools.count()


def compile_action(source: str, entry: str) -> Callable:
    """Check, guard and compile `source`; return its entry function. Call it only through `run`."""
    tree = _parse(source, entry)
    filename = f"{FILENAME_PREFIX}{entry}#{next(_compiled)}>"
    try:
        code = compile(ast.fix_missing_locations(_Guard().visit(tree)), filename, "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise SandboxError(f"the code cannot be compiled: {e}", getattr(e, "lineno", None)) from None
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # for error lines
    namespace = {"__builtins__": dict(_BUILTINS), **_HELPERS}
    exec(code, namespace)  # only defines functions: the checker allows nothing else at the top level
    return namespace[entry]


# ----------------------------------------------------------------------------------------------
# run: budgets, the api proxy and results


@dataclass
class RunResult:
    """What one call of a code action did; `error` and `lineno` are written for the fast agent's retry."""

    returned: object  # what the function returned, as plain data (None if it did not return)
    error: str | None  # "line 3: ZeroDivisionError: division by zero\n    x = 1 / 0"; also set for
    # the sandbox's own stops (time or lines, memory, recursion, api calls), which are the code's fault
    lineno: int | None  # line in the model's code where it failed or was stopped
    stopped: str | None  # None or an Interrupt's reason: "step_budget", "episode_ended", "time_budget", ...
    log: list[str] = field(default_factory=list)  # captured print() lines, at most MAX_LOG_CHARS


_PAGE_MB = resource.getpagesize() / 2**20
_local = threading.local()  # the run whose model code this thread executes


def _rss_mb() -> float:
    """Resident memory of this process: current on Linux, else the peak (the best the OS offers cheaply)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE_MB
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / (2**20 if sys.platform == "darwin" else 2**10)


def _current() -> "_Run":
    state = getattr(_local, "run", None)
    if state is None:
        raise RuntimeError("code actions must be called through sandbox.run")
    return state


class _Run:
    """The budgets and captured output of one call of a code action."""

    def __init__(self, time_limit: float):
        self.time_limit, self.deadline = time_limit, perf_counter() + time_limit
        self.memory_ceiling, self.next_memory_check = _rss_mb() + MEMORY_LIMIT_MB, 0.0
        self.depth, self.lines, self.api_calls, self.output, self.output_chars = 0, 0, 0, [], 0
        self.outer_trace = None  # the tracer the worker thread started with (threading.settrace's)

    def trace_call(self, frame, event, arg):
        """Global tracer: only frames compiled from model source get line events (and a depth count)."""
        if not frame.f_code.co_filename.startswith(FILENAME_PREFIX):
            return None
        self.depth += 1
        return self.trace_line

    def trace_line(self, frame, event, arg):
        if event == "line":
            self.lines += 1
            if self.lines > MAX_LINES:
                raise TimeBudgetExceeded(f"the code ran more than {MAX_LINES} lines (an endless loop?)")
            if self.depth > MAX_DEPTH:  # checked here, not at "call", to report the recursive call's line
                raise RecursionBudgetExceeded(f"more than {MAX_DEPTH} nested calls")
            now = perf_counter()
            if now > self.deadline:
                raise TimeBudgetExceeded(f"the code ran for over {self.time_limit} s outside api calls "
                                         "(an endless loop?)")
            if now > self.next_memory_check:  # reading /proc costs ~15 us: once per ms is ~1% overhead
                self.next_memory_check = now + 1e-3
                if _rss_mb() > self.memory_ceiling:
                    raise MemoryBudgetExceeded(f"the code used more than {MEMORY_LIMIT_MB} MB of memory")
        elif event == "return":
            self.depth -= 1
        return self.trace_line

    def call_api(self, method: Callable, args: tuple, kwargs: dict) -> object:
        """One api call: plain data in and out; inside, the budget clock stops and our tracer is off
        (a coverage tool's, if any, is back), so env code runs at full speed."""
        self.api_calls += 1
        if self.api_calls > MAX_API_CALLS:
            raise ApiCallBudgetExceeded(f"more than {MAX_API_CALLS} api calls (waiting for something?)")
        sys.settrace(self.outer_trace)  # also spares _plain the tracer's per-call overhead
        try:
            args, kwargs = _plain(args) if args else (), _plain(kwargs) if kwargs else {}
            start = perf_counter()
            try:
                value = method(*args, **kwargs)
            except Exception as e:
                raise _scrubbed(e) from None
            finally:
                self.deadline += perf_counter() - start
            return _plain(value)
        finally:
            sys.settrace(self.trace_call)

    def write(self, text: str) -> None:
        room = MAX_LOG_CHARS - self.output_chars
        if room > 0:
            self.output.append(text[:room] + (" ...[output truncated]" if len(text) > room else ""))
            self.output_chars += len(text)


class _ApiProxy:
    """What the model's code sees as `api`: the public names of the real api, read-only, and calls
    that take and return plain data only (no env objects can leak in either direction)."""

    def __init__(self, api: object, state: _Run):
        object.__setattr__(self, "_api", api)
        object.__setattr__(self, "_run", state)

    def __getattr__(self, name: str) -> object:
        if name.startswith("_"):
            raise AttributeError(f"the api has no public attribute {name!r}")
        try:
            value = getattr(self._api, name)
        except Exception as e:
            raise _scrubbed(e) from None
        if not callable(value):
            return _plain(value)
        state = self._run
        method = lambda *args, **kwargs: state.call_api(value, args, kwargs)  # noqa: E731
        object.__setattr__(self, name, method)  # cached: the next lookup skips __getattr__
        return method

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("the api is read-only")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("the api is read-only")

    def __repr__(self) -> str:
        return "<api>"


_SCALARS = frozenset({type(None), bool, int, float, str})


def _scrubbed(error: Exception) -> Exception:
    """The api's exception rebuilt from its message: its args (or an AttributeError's .obj) could
    hold env objects. Types the model may not know become RuntimeError."""
    message = _str(error)[:500]
    if type(error) in (*SAFE_EXCEPTIONS.values(), AttributeError):
        return type(error)(message)
    return RuntimeError(f"{type(error).__name__}: {message}")


def _plain(value: object) -> object:
    """A copy of `value` made of None, bool, int, float, str, list, tuple and dict only."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind in (tuple, list) and len(value) < 16 and all(type(v) in _SCALARS for v in value):
        return kind(value)  # the common small case (args, positions), without the walk below
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


def _model_line(tb) -> tuple[int | None, str]:
    """The innermost line of the traceback that is in the model's code, and that line's text."""
    lineno, text = None, ""
    for frame, line in traceback.walk_tb(tb):
        if frame.f_code.co_filename.startswith(FILENAME_PREFIX):
            lineno, text = line, linecache.getline(frame.f_code.co_filename, line).strip()
    return lineno, text


def run(fn: Callable, api: object, *, time_limit: float = 1.0) -> RunResult:
    """Call `fn(api)` under the budgets; never raises for anything the model's code does.

    The code runs in a short-lived thread of its own, which the caller waits for: it has a large C
    stack (see STACK_MB), its own tracer, and its own sys.exc_info() (CPython 3.11 can leave a handled
    exception behind when a trace function raises inside an `except` block)."""
    state, outcome = _Run(time_limit), {}

    def work() -> None:
        _local.run, state.outer_trace = state, sys.gettrace()
        sys.settrace(state.trace_call)
        try:
            outcome["value"] = fn(_ApiProxy(api, state))
        except BaseException as e:  # noqa: BLE001 - handed over to the calling thread below
            outcome["raised"] = e
        finally:
            sys.settrace(None)

    previous = threading.stack_size(STACK_MB * 2**20)
    try:
        worker = threading.Thread(target=work, name="sandbox", daemon=True)
        worker.start()
    finally:
        threading.stack_size(previous)
    worker.join()
    result = RunResult(None, None, None, None, "".join(state.output).splitlines())
    raised = outcome.get("raised")
    if raised is None:
        try:
            result.returned = _plain(outcome["value"])
        except (TypeError, ValueError) as e:
            result.error = f"{type(e).__name__}: the code action returned it: {e}"
    elif isinstance(raised, Interrupt):
        result.stopped = raised.reason
        result.lineno, text = _model_line(raised.__traceback__)
        if not isinstance(raised, StepBudgetExceeded | EpisodeEnded):  # the sandbox's stops are errors
            where = f"line {result.lineno}: " if result.lineno else ""
            result.error = f"{where}stopped: {raised}" + (f"\n    {text}" if text else "")
    elif isinstance(raised, Exception):  # whatever the model's code raised
        result.lineno, text = _model_line(raised.__traceback__)
        shown = _str(raised)[:500] if _text_size(raised, 10_000) <= 10_000 else "..."
        message = f"{type(raised).__name__}: {shown}"
        result.error = f"line {result.lineno}: {message}\n    {text}" if result.lineno else message
    else:
        raise raised
    return result
