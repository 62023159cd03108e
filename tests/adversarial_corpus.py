"""Adversarial code actions for the sandbox: each must be rejected by `checker.check` or stopped in the
sandbox's worker process within its budget, leaving the test process unharmed (see tests/test_sandbox.py).

Every snippet defines `act(api)`. `expect` names the outcomes that count as caught: "check" (rejected
by the checker, compiler errors included), "error" (the code got an exception it could not escape), or
a stop reason: "time_budget" (stopped by the line/time budget, or the worker killed after a C call
overran it), "memory", "recursion", "step_budget", "episode_ended". A snippet that returns
normally is a hole. Memory snippets may hit the time budget first on a slow machine;
test_sandbox_budgets.py checks the memory stop itself.
The api is tests/sandbox_helpers.py's FakeApi: step() spends a 5-step budget, leak() raises an error
carrying a private object, secret is a non-plain attribute, targets(x) returns internal lists.
"""

from dataclasses import dataclass
from textwrap import dedent


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    expect: tuple[str, ...]


def _case(name: str, body: str, *expect: str) -> Case:
    """`body` is the indented body of act(api), or whole source when it already has `def act`."""
    body = dedent(body).strip("\n")
    source = body if "def act(" in body else "def act(api):\n" + "\n".join("    " + line for line in
                                                                          body.splitlines())
    return Case(name, source + "\n", expect)


CHECK = "check"
CORPUS: list[Case] = [
    # --- imports and the builtins module
    _case("import", "import os\nos.system('true')", CHECK),
    _case("import_from", "from os import system\nsystem('true')", CHECK),
    _case("dunder_import", "return __import__('os')", CHECK),
    _case("builtins_dict", "return __builtins__['eval']('1')", CHECK),
    _case("eval", "return eval('1 + 1')", CHECK),
    _case("exec", "exec('x = 1')", CHECK),
    _case("compile", "return compile('1', 'f', 'eval')", CHECK),
    _case("open_file", "return open('/etc/passwd').read()", CHECK),
    _case("globals", "return globals()", CHECK),
    _case("vars_api", "return vars(api)", CHECK),
    _case("builtin_self", "return len.__self__", CHECK),
    _case("print_globals", "return print.__globals__['sys']", CHECK),
    # --- object-graph walks
    _case("class_bases_walk", "return ().__class__.__bases__[0].__subclasses__()", CHECK),
    _case("type_walk", "return type(api)", CHECK),
    _case("object_subclasses", "return object.__subclasses__()", CHECK),
    _case("mro_to_baseexception", "Exception = ValueError.mro()[2]\nreturn True", CHECK),
    _case("generator_frame", "g = (x for x in [1])\nreturn g.gi_frame.f_back.f_globals", CHECK),
    _case("traceback_frame", """
        try:
            1 / 0
        except ZeroDivisionError as e:
            return e.__traceback__.tb_frame.f_globals
    """, CHECK),
    _case("function_code", "def act(api):\n    return act.__code__\n", CHECK),
    _case("private_helper", "return _arith('*', [0], 10 ** 10)", CHECK),
    # --- attribute access by strings and formats
    _case("getattr_string", "return getattr(api, '_api')", CHECK),
    _case("format_attribute", "return '{0.__class__}'.format(api)", CHECK),
    _case("format_map", "return '{x.__class__}'.format_map({'x': api})", CHECK),
    _case("fstring_dunder", "return f'{api.__class__}'", CHECK),
    _case("api_private", "return api._api", CHECK),
    # --- mutating the api
    _case("api_replace_method", "api.step = None\nreturn True", CHECK),
    _case("api_new_attribute", "api.x = 1\nreturn True", CHECK),
    _case("api_delete", "del api.step\nreturn True", CHECK),
    # --- syntax that could swallow a stop or run outside the budget
    _case("bare_except_loop", """
        while True:
            try:
                api.step()
            except:
                pass
    """, CHECK),
    _case("except_baseexception", """
        try:
            while True:
                pass
        except BaseException:
            return True
    """, CHECK),
    _case("finally_return", """
        try:
            while True:
                pass
        finally:
            return True
    """, CHECK),
    _case("except_variable", "E = Exception\ntry:\n    api.step()\nexcept E:\n    pass", CHECK),
    _case("shadow_exception", "Exception = ValueError\nreturn True", CHECK),
    _case("with_statement", "with api:\n    return True", CHECK),
    _case("class_def", "class A:\n    pass\nreturn A", CHECK),
    _case("global_stmt", "global x\nx = 1", CHECK),
    _case("yield_generator", "yield api.step()", CHECK),
    _case("yield_lambda", "return (lambda: (yield))()", CHECK),
    _case("lambda_default_runs_early", "def act(api, f=lambda: 1):\n    return True\n", CHECK),
    _case("helper_default_runs_at_def", "def h(x=[0] * 10):\n    return x\ndef act(api):\n    return h()\n",
          CHECK),
    _case("async_def", "async def act(api):\n    return True\n", CHECK),
    _case("decorator", "def act(api):\n    return True\n@print\ndef h():\n    pass\n", CHECK),
    _case("top_level_statement", "while True:\n    pass\ndef act(api):\n    return True\n", CHECK),
    _case("match_class_pattern", "match api:\n    case object(__class__=c):\n        return c", CHECK),
    # --- allocations refused before they happen
    _case("huge_width_fstring", "return f'{1:>1000000000}'", CHECK),
    _case("zfill_huge", "return ''.zfill(10 ** 9)", CHECK),
    _case("to_bytes_huge", "return (1).to_bytes(10 ** 9, 'big')", CHECK),
    _case("starred_amplify", "a = [0] * 1000000\nreturn len([*a, *a, *a, *a, *a, *a, *a, *a])", CHECK),
    _case("list_repeat", "return len([0] * 10 ** 10)", "error"),
    _case("str_repeat", "return len('a' * 10 ** 9)", "error"),
    _case("int_power_tower", "return 10 ** 10 ** 10", "error"),
    _case("int_shift", "return 1 << 10 ** 10", "error"),
    _case("list_range", "return len(list(range(10 ** 10)))", "error"),
    _case("doubling_concat", "x = [0]\nwhile True:\n    x = x + x", "error"),
    _case("doubling_augassign", "x = 'ab'\nwhile True:\n    x += x", "error"),
    _case("int_square_loop", "x = 10 ** 1000\nwhile True:\n    x *= x", "error"),
    _case("join_amplify", "return len(''.join(['a' * 1000000] * 1000))", "error"),
    _case("replace_amplify", "return len(('a' * 100000).replace('a', 'b' * 1000))", "error"),
    _case("str_of_aliased_list", "return len(str(['a' * 1000000] * 1000))", "error"),
    _case("fstring_of_aliased_list", "return len(f\"{['a' * 1000000] * 1000}\")", "error"),
    _case("percent_format_width", "return '%1000000000s' % 'a'", "error"),
    _case("sum_of_lists", "return len(sum([[0] * 100000] * 1000, []))", "error"),
    _case("zip_star_amplify", "return len(list(zip(*[[0] * 1000] * 100000)))", "error"),
    _case("colliding_int_keys", "p = 2 ** 60\nreturn len(set(i * p + i * p for i in range(1, 50000)))", "error"),
    _case("colliding_int_range", "return len(set(range(0, 10 ** 5 * (2 ** 61 - 1), 2 ** 61 - 1)))", "error"),
    _case("colliding_int_literal", "return len({2305843009213693951, 0})", CHECK),
    _case("float_to_huge_int", "return int(1e300) + 1", "error"),
    _case("int_to_huge_str", "return len(str(10 ** 20000))", "error"),
    _case("memory_growth", "x = []\nwhile True:\n    x.append('a' * 999000 + str(len(x)))",
          "memory", "time_budget"),
    _case("memory_comprehension", "return len([[0] * 1000000 for _ in range(1000)])", "memory",
          "time_budget"),
    _case("self_extending_generator", "x = [0]\nx.extend(v for v in x)", "time_budget", "memory"),
    _case("deep_tuple_hash", "x = ()\nfor _ in range(300000):\n    x = (x,)\nreturn len({x})", "time_budget"),
    # --- endless loops and recursion
    _case("while_true_pass", "while True:\n    pass", "time_budget"),
    _case("nested_range_loops", "for i in range(10 ** 6):\n    for j in range(10 ** 6):\n        pass",
          "time_budget"),
    _case("loop_swallowing_errors", """
        while True:
            try:
                1 / 0
            except Exception:
                pass
    """, "time_budget"),
    _case("loop_in_comprehension", "return sum(i * j for i in range(10 ** 6) for j in range(10 ** 6))",
          "time_budget"),
    _case("recursion_bomb", "def f(n):\n    return f(n + 1)\ndef act(api):\n    return f(0)\n", "recursion"),
    _case("recursion_catching_errors", """
        def f():
            try:
                return f()
            except Exception:
                return f()
        def act(api):
            return f()
    """, "recursion"),
    _case("lambda_recursion", "f = lambda n: f(n + 1)\nreturn f(0)", "recursion"),
    _case("busy_wait_on_api", "while api.grid() is not None:\n    pass", "time_budget"),
    _case("swallow_api_errors_forever", """
        while True:
            try:
                api.leak()
            except ValueError:
                pass
    """, "time_budget"),
    _case("huge_output", "while True:\n    print('x' * 100000)", "time_budget"),
    # --- swallowing the api's stops
    _case("swallow_step_budget", """
        while True:
            try:
                api.step()
            except Exception:
                pass
    """, "step_budget"),
    _case("swallow_step_budget_tuple", """
        while True:
            try:
                api.step()
            except (ValueError, RuntimeError, Exception):
                continue
    """, "step_budget"),
    _case("swallow_via_alias", """
        s = api.step
        while True:
            try:
                s()
            except Exception:
                pass
    """, "step_budget"),
    _case("swallow_in_generator", "return list(api.step() for _ in range(1000))", "step_budget"),
    _case("swallow_episode_end", "try:\n    api.end()\nexcept Exception:\n    return True", "episode_ended"),
    # --- reaching what is behind the api
    _case("api_nonplain_attribute", "return api.secret", "error"),
    _case("api_error_payload", """
        try:
            api.leak()
        except ValueError as e:
            return e.args[0].steal()
    """, "error"),
    _case("return_callable", "return api.step", "error"),
    _case("return_generator", "return (api.step() for _ in range(10))", "error"),
]

# The trainer's own safety, beyond the checks: each of these would hurt a training process that ran the
# code itself; they run in a worker process, killed when a single C call overruns.
_DEEP = "x = []\nfor _ in range(20000):\n    x = [x]\n"  # nested deeper than any recursive repr allows
_COLUMNS = "\n".join(f"c{j} = ([-1] * {2 ** j} + [-2] * {2 ** j}) * {2 ** (15 - j)}" for j in range(16))
_COLLIDING = _COLUMNS + "\nkeys = list(zip(" + ", ".join(f"c{j}" for j in range(16)) + "))\n"  # hash(-1) == hash(-2)
_CHAIN = "x = [1]\nfor _ in range(5000):\n    x = " + "enumerate(" * 8 + "x" + ")" * 8 + "\n"  # 40k levels
CORPUS += [
    # --- deep recursion in results and exception arguments (formatted in the worker, not the trainer)
    _case("deep_list_result", _DEEP + "return x", "error"),
    _case("deep_dict_result", "x = {}\nfor _ in range(20000):\n    x = {'a': x}\nreturn x", "error"),
    _case("deep_exception_arg", _DEEP + "raise ValueError(x)", "error"),
    _case("deep_tuple_exception_arg", "x = ()\nfor _ in range(20000):\n    x = (x, 1)\nraise KeyError(x)", "error"),
    _case("deep_list_str", _DEEP + "return str(x)", "error"),
    _case("deep_list_fstring_repr", _DEEP + "return f'{x!r}'", "error"),
    # --- print with a huge separator or end
    _case("print_huge_sep", "a = ['x'] * 1000000\nwhile True:\n    print(*a, sep='y' * 1000000)", "time_budget"),
    _case("print_huge_end", "while True:\n    print('x', end='y' * 1000000)", "time_budget"),
    # --- str/repr/f-strings of dict views and of containers whose elements expand
    _case("str_of_dict_values", "d = dict.fromkeys(range(1000000), 'a' * 1000000)\nreturn len(str(d.values()))",
          "error"),
    _case("fstring_of_dict_items", "d = dict.fromkeys(range(100000), 'a' * 1000)\nreturn len(f'{d.items()}')",
          "error"),
    _case("fstring_ascii_astral", "s = '\\U0001f600' * 900000\nreturn len(f'{s!a}')", "error"),
    _case("fstring_repr_control_chars", "s = '\\x00' * 900000\nreturn len(f'{[s, s]}')", "error"),
    _case("str_of_list_of_astral", "return len(str(['\\U0001f600' * 500000] * 2))", "error"),
    # --- exceptions whose arguments would be formatted by whoever reports them
    _case("exception_huge_args", "raise ValueError(['a' * 1000000] * 1000)", "error"),
    _case("exception_args_dict_view", "raise ValueError(dict.fromkeys(range(100000), 'a' * 1000).values())",
          "error"),
    # --- huge arguments to primitive api calls (bounded at the proxy, before the trainer sees them)
    _case("api_huge_string_arg", "return api.targets('x' * 1000000)", "error"),
    _case("api_huge_list_arg", "return api.targets([0] * 1000000)", "error"),
    _case("api_deep_arg", _DEEP + "return api.targets(x)", "error"),
    _case("api_object_arg", "return api.targets(api)", "error"),
    _case("api_private_kwarg", "return api.targets(**{'_budget': 1})", "error"),
    # --- self-extending lists and several large displays in one line
    _case("self_extending_list", "x = [0]\nwhile True:\n    x.extend(x)", "memory", "time_budget"),
    _case("self_extending_for", "x = [0]\nfor v in x:\n    x.append(v)", "time_budget", "memory"),
    _case("self_iadd", "x = [0]\nwhile True:\n    x += x", "error"),
    _case("many_big_displays", "return len([" + ", ".join(["[0] * 999999"] * 60) + "])", "memory",
          "time_budget"),
    _case("many_big_strings", "return len((" + ", ".join(f"'{c}' * 999999" for c in "abcdefgh" * 80) + "))",
          "memory", "time_budget"),
    # --- key functions that build big objects; sorted/min/max with a key over large inputs
    _case("sorted_key_big_lists", "return sorted(range(1000), key=lambda i: [i] * 999999)[0]",
          "memory", "time_budget"),
    _case("max_key_big_strings", "return max(range(100000), key=lambda i: 'a' * 999999)", "time_budget"),
    _case("sorted_builtin_key_loop", "x = list(range(999999))\nwhile True:\n    x = sorted(x, key=str)",
          "time_budget"),
    _case("min_builtin_key_loop", "while True:\n    min(range(999999), key=abs)", "time_budget"),
    _case("max_equal_big_strings", "a = 'a' * 999999\nb = 'a' * 999999\nreturn max([a, b] * 499999)",
          "time_budget"),
    # --- huge int and float arithmetic
    _case("int_square_past_limit", "x = 2 ** 60\nreturn x * x", "error"),
    _case("int_from_long_digits", "return int('9' * 4000) % 7", "error"),
    _case("float_overflow", "return 10.0 ** 400", "error"),
    # --- hash collisions: 2**16 distinct tuples of -1/-2 share one hash (quadratic work in one C call)
    _case("colliding_tuple_set", _COLLIDING + "return len(set(keys))", "time_budget"),
    _case("colliding_tuple_dict", _COLLIDING + "return len(dict.fromkeys(keys))", "time_budget"),
    # --- long chains of iterator objects, freed when the call ends
    _case("iterator_chain_returned", _CHAIN + "return x", "error"),
    _case("iterator_chain_consumed", _CHAIN + "return list(x)", "error"),
    _case("iterator_chain_abandoned", _CHAIN + "while True:\n    pass", "time_budget"),
    # --- reference cycles holding big objects past the end of a stopped call
    _case("cycle_through_exception", """
        x = [[0] * 999999 for _ in range(10)]
        x.append(x)
        raise ValueError(x)
    """, "error"),
    # --- compiler errors: rejected by the check, with a line number, never raised later
    _case("continue_outside_loop", "x = 1\ncontinue", CHECK),
    _case("break_outside_loop", "if True:\n    break", CHECK),
    _case("repeated_keyword", "return dict(a=1, a=2)", CHECK),
    _case("repeated_argument", "def h(a, a):\n    return a\ndef act(api):\n    return h(1, 2)\n", CHECK),
    _case("two_starred_targets", "a, *b, *c = [1, 2, 3]\nreturn a", CHECK),
    _case("lone_starred_target", "*a = [1, 2]\nreturn a", CHECK),
]
