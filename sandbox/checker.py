"""The sandbox's check and compile step for LLM-written code actions: an AST allowlist, then a guarded compile.

`check` walks an allowlist of syntax (no imports, no `_` names, no dunder or frame attributes, no
introspection builtins, no classes, `global`, `with` or `finally`; `except` may only name the builtin
Exception subclasses, so a stop, an `Interrupt`, can never be swallowed) and compiles the code, so a
compiler error (`continue` outside a loop, a repeated keyword) is a SandboxError too.

`compile_action` checks the code again, rewrites it (rewrite.py: size guards around the operations
that can blow up inside one C call, a budget check at every loop iteration and function entry) and
runs the module with the restricted builtins of guards.py. Only the worker process (worker.py) calls
it, and binds each run's budget checks into the function it returns.

    checker.check(source, "chop_tree")                 # raises SandboxError(message, lineno)
    fn = checker.compile_action(source, "chop_tree")   # in the worker: checked, guarded, compiled
"""

import ast
import itertools
import linecache
import re
from collections.abc import Callable

from sandbox import rewrite
from sandbox.guards import _BUILTINS, _CHECKS, _HELPERS, SAFE_EXCEPTIONS
from sandbox.limits import FILENAME_PREFIX, MAX_INT, MAX_SOURCE_CHARS


class SandboxError(Exception):
    """Code rejected by the checker (or failed to compile). .lineno: line in the model's code, or None."""

    def __init__(self, message: str, lineno: int | None = None):
        super().__init__(f"line {lineno}: {message}" if lineno else message)
        self.message, self.lineno = message, lineno


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
# compile_action: the checked code, guarded and compiled

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
    worker.run, which binds its budget checks (in the function's globals) for each run."""
    tree = _parse(source, entry)
    _compile(tree, "<check>")  # the compiler's own errors, reported on the model's unguarded code
    filename = f"{FILENAME_PREFIX}{entry}#{next(_compiled)}>"
    try:
        guarded = rewrite.rewrite(tree)
    except RecursionError:
        raise SandboxError("the code is nested too deeply") from None
    code = _compile(guarded, filename)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # for error lines
    namespace = {"__builtins__": dict(_BUILTINS), **_HELPERS, **_CHECKS}
    exec(code, namespace)  # only defines functions: the checker allows nothing else at the top level
    return namespace[entry]

