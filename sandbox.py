"""The sandbox for LLM-written code actions: an AST allowlist, a guarded compile and restricted builtins.

A code action is source text defining one entry function `def <entry>(api):` (plus small helper
functions) that drives the environment through the primitive API and returns True on success. The
text is untrusted, so it passes three layers:

1. `check` walks an allowlist of syntax (no imports, no `_` names, no dunder or frame attributes, no
   introspection builtins, no classes, `global`, `with` or `finally`; `except` may only name the
   builtin Exception subclasses, so a stop, an `Interrupt`, can never be swallowed) and compiles the
   code, so a compiler error (`continue` outside a loop, a repeated keyword) is a SandboxError too.
2. `compile_action` rewrites (sandbox_rewrite.py) the operations that can blow up inside one C call
   (`*`, `**`, `<<`, `+`, `-`, `%`, `str.join`/`replace`, f-string fields) into size-checked helpers,
   puts a budget check at every loop iteration (comprehensions' included) and function entry, and runs
   the module with restricted builtins (`range`, `str`, `int`, `zip`, ... wrapped to refuse huge inputs
   or results).
3. The code runs only in a worker process (sandbox_worker.py), whose checks (`_tick`, `_enter`,
   `_leave`: names the model cannot write, so cannot call, rebind or reset) hold it to a time,
   iteration, depth and memory budget, driven by the trainer through sandbox_host.py, which kills and
   replaces the worker when a single C call overruns the budget or the worker dies: what the checks
   cannot see cannot reach the trainer.

Compiled-in checks, not a line tracer: a trace call on every line of every skill halved the speed of
training with code actions; a check per iteration or call costs a few percent (bench/code_sps.py).

    sandbox.check(source, "chop_tree")              # raises SandboxError(message, lineno)
    worker = sandbox_host.Worker()                   # one per env; the process starts on first use
    result = worker.run(source, "chop_tree", api)   # a RunResult; never raises for the code's doing
"""

import ast
import itertools
import linecache
import operator
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import sandbox_rewrite

MAX_SOURCE_CHARS = 20_000  # a code action is a short function, not a program
MAX_LEN = 1_000_000  # longest str/list/tuple/range one operation may build, or a builtin may consume
# Largest |int| the code may build. From 2**61 - 1 on, ints share hashes (hash(x) is x mod 2**61 - 1),
# and a set of a few thousand colliding ints takes seconds of quadratic work in one C call.
MAX_INT = 2**60
TIME_LIMIT_S = 1.0  # wall time a call may run outside its env steps (env.CodeActions' default)
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
    """The code ran past its time budget (env steps excluded) or its line budget."""
    reason = "time_budget"


class MemoryBudgetExceeded(Interrupt):
    reason = "memory"


class RecursionBudgetExceeded(Interrupt):
    reason = "recursion"


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
    written in the allowed subset of Python that compiles."""
    _compile(_parse(source, entry), "<check>")


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


_LINEAR, _HALF = frozenset("+-%"), 2**30  # |a|, |b| < 2**30: a * b stays within MAX_INT


def _numbers(op: str, a: object, b: object) -> object:
    """`a op b` for plain ints and floats where it cannot build anything big (floats overflow or raise,
    ints here stay within MAX_INT): the same result or error as `_check_arith` then the operation,
    without its checks, for the arithmetic of game code in loops. None: not such a case."""
    ta, tb = type(a), type(b)
    if ta is float and (tb is float or tb is int) or tb is float and ta is int:
        return _OPERATORS[op](a, b)
    if ta is int and tb is int:
        if op in _LINEAR:
            result = _OPERATORS[op](a, b)
            return result if -MAX_INT <= result <= MAX_INT else _small(result)  # _small raises
        if op == "*" and -_HALF < a < _HALF and -_HALF < b < _HALF:
            return a * b
    return None


def _arith(op: str, a: object, b: object) -> object:
    result = _numbers(op, a, b)
    if result is None:
        _check_arith(op, a, b)
        result = _OPERATORS[op](a, b)
    return result


def _aug(op: str, current: object, value: object) -> object:
    """`x op= v` keeps its in-place semantics; only the size is checked first (a float builds nothing)."""
    kinds = type(current), type(value)
    if float not in kinds or str in kinds:
        if _numbers(op, current, value) is None:
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
        elif isinstance(x, str):  # repr() and ascii() write a character as up to 10 ("\U0001f600")
            total += len(x) * (1 if x.isascii() and x.isprintable() else 10) + 2
        elif isinstance(x, list | tuple | set | frozenset | dict | _DictViews):
            total += 20 + 2 * len(x)
            stack.append(iter(x.items() if isinstance(x, dict) else x))
        elif isinstance(x, BaseException):
            total += 40
            stack.append(iter(x.args))
        else:
            total += x.bit_length() // 3 + 2 if isinstance(x, int) else 100
    return total


_DictViews = type({}.keys()) | type({}.values()) | type({}.items())


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


def _print(*args: object, sep: str | None = " ", end: str | None = "\n") -> None:
    """print() into the run's bounded log, piece by piece: `print(*parts, sep=big)` never joins."""
    sep, end = " " if sep is None else sep, "\n" if end is None else end
    if not isinstance(sep, str) or not isinstance(end, str):
        raise TypeError("print() sep and end must be None or strings")
    log = _current()
    for i, arg in enumerate(args):
        if not log.write(_str(arg)) or (i + 1 < len(args) and not log.write(sep)):
            return  # the log is full
    log.write(end)


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


def _unbudgeted() -> None:
    raise RuntimeError("code actions must be called through sandbox_worker.run")


def _budgeted(fn: Callable) -> Callable:
    """A lambda's calls count as the model's calls (depth and budget), as a def's do through the
    checks compiled into its body, which a lambda (one expression) has no room for."""
    checks = fn.__globals__

    def call(*args, **kwargs):
        checks["_enter"]()
        try:
            return fn(*args, **kwargs)
        finally:
            checks["_leave"]()

    return call


_HELPERS = {"_arith": _arith, "_aug": _aug, "_sized_method": _sized_method, "_text": _text, "_budgeted": _budgeted}
_CHECKS = {"_tick": _unbudgeted, "_enter": _unbudgeted, "_leave": _unbudgeted}  # sandbox_worker binds each run's


_compiled = itertools.count()


def _compile(tree: ast.Module, filename: str) -> object:
    try:
        return compile(tree, filename, "exec")
    except SyntaxError as e:
        raise SandboxError(f"SyntaxError: {e.msg}", e.lineno) from None
    except (ValueError, RecursionError, MemoryError) as e:
        raise SandboxError(f"the code cannot be compiled: {e}") from None


def compile_action(source: str, entry: str) -> Callable:
    """Check, guard and compile `source`; return its entry function. Call it only through
    sandbox_worker.run, which binds its budget checks (in the function's globals) for each run."""
    tree = _parse(source, entry)
    _compile(tree, "<check>")  # the compiler's own errors, reported on the model's unguarded code
    filename = f"{FILENAME_PREFIX}{entry}#{next(_compiled)}>"
    try:
        guarded = sandbox_rewrite.rewrite(tree)
    except RecursionError:
        raise SandboxError("the code is nested too deeply") from None
    code = _compile(guarded, filename)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # for error lines
    namespace = {"__builtins__": dict(_BUILTINS), **_HELPERS, **_CHECKS}
    exec(code, namespace)  # only defines functions: the checker allows nothing else at the top level
    return namespace[entry]



# ----------------------------------------------------------------------------------------------
# What a run reports, and the hook through which print() reaches the running code's log


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


_local = threading.local()  # .run: the run whose model code this thread executes (sandbox_worker.run)


def _current():
    """The running code's log: an object with write(text) -> bool (False once it is full)."""
    state = getattr(_local, "run", None)
    if state is None:
        raise RuntimeError("code actions must be called through sandbox_worker.run")
    return state
