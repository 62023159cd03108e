"""Adversarial code actions for the sandbox: each must be rejected by `sandbox.check` or stopped by
`sandbox.run` within 2 s, leaving the test process unharmed (see tests/test_sandbox.py).

Every snippet defines `act(api)`. `expect` names the outcomes that count as caught: "check" (rejected
by the checker), "error" (the code got an exception it could not escape), or a stop reason such as
"time_budget", "memory", "recursion", "api_calls" or "step_budget". A snippet that returns normally is a hole.
Memory snippets may hit the time budget first on a slow machine; test_sandbox.py checks the memory
stop itself with a lower limit.
The api is tests/test_sandbox.py's FakeApi: step() spends a 5-step budget, leak() raises an error
carrying a private object, secret is a non-plain attribute.
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
CORPUS = [
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
    _case("busy_wait_on_api", "while api.grid() is not None:\n    pass", "api_calls"),
    _case("swallow_api_errors_forever", """
        while True:
            try:
                api.leak()
            except ValueError:
                pass
    """, "api_calls", "time_budget"),
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
