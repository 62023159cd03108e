"""What checked model code runs with: size guards and restricted builtins, the sandbox's runtime helpers.

checker.compile_action compiles the code with the calls rewrite.py inserts bound to the helpers here
(`_arith`, `_aug`, `_sized_method`, `_text`, `_budgeted`: names model code cannot write) and with
`_BUILTINS` as its only builtins: `range`, `str`, `int`, `zip`, ... wrapped to refuse huge inputs or
results, before CPython builds them in one uninterruptible C call. print() writes to the running
code's bounded log, which the worker process (worker.py) sets for each run (`_local.run`).
"""

import operator
import threading
from collections.abc import Callable

from sandbox.limits import MAX_INT, MAX_LEN

# ----------------------------------------------------------------------------------------------
# Size guards: the operations rewrite.py routes here, refused before they build something huge


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


# ----------------------------------------------------------------------------------------------
# The restricted builtins: the only builtins model code gets


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


# the exceptions model code may raise and name in `except` (the checker refuses any other name there)
SAFE_EXCEPTIONS = {e.__name__: e for e in (Exception, ValueError, KeyError, IndexError, TypeError,
                                           RuntimeError, ZeroDivisionError)}
_WRAPPED_TYPES = {_str: str, _int: int, _range: range, _zip: zip, _enumerate: enumerate}
_BUILTINS = {
    "range": _range, "len": len, "min": min, "max": max, "abs": abs, "sum": _sum, "any": any, "all": all,
    "enumerate": _enumerate, "zip": _zip, "sorted": sorted, "reversed": reversed, "list": list,
    "dict": dict, "set": set, "tuple": tuple, "int": _int, "float": float, "bool": bool, "str": _str,
    "isinstance": _isinstance, "round": _round, "print": _print, **SAFE_EXCEPTIONS,
}


# ----------------------------------------------------------------------------------------------
# What checker.compile_action binds into the code's namespace besides the builtins


def _unbudgeted() -> None:
    raise RuntimeError("code actions must be called through sandbox.worker.run")


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
_CHECKS = {"_tick": _unbudgeted, "_enter": _unbudgeted, "_leave": _unbudgeted}  # worker.run binds each run's


# ----------------------------------------------------------------------------------------------
# The hook through which print() reaches the running code's log

_local = threading.local()  # .run: the run whose model code this thread executes (sandbox.worker.run)


def _current():
    """The running code's log: an object with write(text) -> bool (False once it is full)."""
    state = getattr(_local, "run", None)
    if state is None:
        raise RuntimeError("code actions must be called through sandbox.worker.run")
    return state
