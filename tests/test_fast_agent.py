"""The fast agent driven through a scripted HTTP LLM server: the fast loop (write, check, dry-run, fix),
what its prompt says, and the code being fixed reaching it from train.py.

    python -m pytest -q tests/test_fast_agent.py
"""

from __future__ import annotations

import json

import pytest

from core import CodeAction, SubAction, api_doc
from env import CHOP_TREE, CrafterAPI
from fast_agent import FastAgent, extract_code, save_attempts
from prompts.code_writer import CODE_REPLY_TOKENS, DRINK_WATER
from reference import plans
from sandbox import checker, limits
from tests.fake_llm import FakeLLMServer, client, http_error, text_of, truncated

DOC = api_doc(CrafterAPI)


SUB = SubAction("chop_tree", "code", "Walk to the nearest tree and chop it once.", "")
BROKEN = "```python\ndef chop_tree(api):\n    n = len(api.view()) - 7\n    x = 1 / n\n    return True\n```"
FIXED = "Here it is:\n```python\ndef chop_tree(api):\n    \"\"\"Chop.\"\"\"\n    return api.do()\n```\n"


def test_code_that_raises_at_line_3_is_fixed_on_the_next_attempt():
    with FakeLLMServer([BROKEN, FIXED]) as srv:
        agent = FastAgent(client(srv))
        action = agent.write(SUB, DOC)
    assert action is not None and action.name == "chop_tree" and action.doc == "Chop."
    assert len(srv.requests) == 2
    feedback = srv.requests[1].json["messages"][-1]["content"]
    assert "line 3" in feedback and "ZeroDivisionError" in feedback and "x = 1 / n" in feedback
    assert srv.requests[1].json["messages"][-2]["content"] == BROKEN
    assert [a.error is None for a in agent.last_attempts] == [False, True]
    assert agent.last_attempts[0].line == 3


def test_every_attempt_is_saved_with_its_code_error_and_line(tmp_path):
    with FakeLLMServer([BROKEN, truncated(), FIXED]) as srv:
        agent = FastAgent(client(srv))
        assert agent.write(SUB, DOC) is not None
    save_attempts(agent.last_attempts, tmp_path / "attempts", "chop_tree")
    folder = tmp_path / "attempts"
    rows = [json.loads(x) for x in (folder / "attempts.jsonl").read_text().splitlines()]
    assert [(r["attempt"], r["accepted"], r["line"]) for r in rows] == [(1, False, 3), (2, False, None),
                                                                        (3, True, None)]
    assert "ZeroDivisionError" in rows[0]["error"] and "x = 1 / n" in (folder / rows[0]["file"]).read_text()
    assert rows[1]["file"] is None and rows[1]["error"] == f"the reply was cut off at max_tokens={CODE_REPLY_TOKENS}"
    assert (folder / "chop_tree_3.py").read_text() == extract_code(FIXED, "chop_tree")


def test_first_prompt_shows_api_doc_example_rules_and_the_critics_note():
    with FakeLLMServer([FIXED]) as srv:
        FastAgent(client(srv)).write(SUB, DOC, feedback="face the tree before `do`")
    text = text_of(srv.requests[0])
    assert DOC in text and "def drink_water(api):" in text and "`import` (Import)" in text
    assert CHOP_TREE.source.strip() not in text  # the example is never the answer to the default task (collect_wood)
    checker.check(DRINK_WATER, "drink_water")  # and it is code the sandbox accepts
    assert SUB.spec in text and "face the tree before `do`" in text


# chop_tree's row of an iteration's stats.json (CodeStats.summary), as train.py hands it to a rewrite
CHOP_STATS = {"chosen": 4321, "share": 0.083, "success_rate": 0.412, "mean_steps": 23.75, "mean_reward": 0.875,
              "errors": [["line 3: ZeroDivisionError: division by zero", 17], ["stopped: step budget", 5]]}


def test_a_rewrite_shows_the_code_it_changes_with_its_statistics():
    current = CodeAction("chop_tree_v2", "def chop_tree(api):\n    return api.go_to('tree', 9) and api.do()\n",
                         entry="chop_tree")
    with FakeLLMServer([FIXED]) as srv:
        FastAgent(client(srv)).write(SUB, DOC, feedback="keep the structure; face the tree first",
                                     current=current, stats=CHOP_STATS)
    text = text_of(srv.requests[0])
    assert current.source.strip() in text and "code now in use for `chop_tree` (`chop_tree_v2`)" in text
    assert "called 4321 times" in text and "a share 0.412 of those calls succeeded" in text and "23.75" in text
    assert "'line 3: ZeroDivisionError: division by zero' x17" in text
    assert "keep the structure; face the tree first" in text
    with FakeLLMServer([FIXED]) as srv:
        FastAgent(client(srv)).write(SUB, DOC, current=current)  # never ran: the code, no statistics
    assert current.source.strip() in text_of(srv.requests[0]) and "called 4321 times" not in text_of(srv.requests[0])


# One breach of each rule checker.check enforces, with the words of its error: the prompt must quote them.
BREACHES = {
    "import os": "Import is not allowed in code actions",
    "class A:\n    pass": "ClassDef is not allowed in code actions",
    "with x:\n    pass": "With is not allowed in code actions",
    "global x": "Global is not allowed in code actions",
    "_x = 1": "names starting with '_' are not allowed",
    "f(_k=1)": "keyword names starting with '_' are not allowed",
    "x = api._env": "the attribute ._env is not allowed",
    "x = '{}'.format(1)": "the attribute .format is not allowed",
    "x = eval('1')": "'eval' is not available in code actions",
    "len = 3": "do not rebind the built-in name 'len'",
    "api.x = 1": "assigning or deleting attributes is not allowed (the api is read-only)",
    "try:\n    pass\nexcept:\n    pass": "`except` must name built-in exceptions (Exception, ValueError",
    "try:\n    pass\nfinally:\n    pass": "`finally` is not allowed",
    "x = b'a'": "bytes literals are not allowed",
    "x = 2 ** 70 if False else 1180591620717411303424": "integer literals beyond +-2**60 are not allowed",
    "x = f'{1:01000}'": "f-string format specs must be constants with widths below 1000",
    "f(*a, *b)": "at most one *unpacking per call or display",
}
TOP_LEVEL = {
    "N = 3\ndef chop_tree(api):\n    return True\n": "only function definitions may appear at the top level",
    "def chop_tree(api, n=1):\n    return True\n": "the entry function must take exactly one argument",
    "def other(api):\n    return True\n": "define exactly one function `def chop_tree(api):`",
    "@d\ndef chop_tree(api):\n    return True\n": "decorators are not allowed",
    "def chop_tree(api, n=[]):\n    return True\n": "the entry function must take exactly one argument",
    "def helper(n=[]):\n    return n\ndef chop_tree(api):\n    return True\n":
        "default argument values must be plain constants",
    "def chop_tree(api):\n    return f'" + "{1}" * 21 + "'\n": "an f-string may have at most 20 fields",
    "def chop_tree(api):\n    x = 'a' * 1\n" + "#" * 20_000: "the code must be a string of at most 20000 characters",
}


def rules_prompt() -> str:
    with FakeLLMServer([FIXED]) as srv:
        FastAgent(client(srv)).write(SUB, DOC)
    return text_of(srv.requests[0])


@pytest.fixture(scope="module")
def prompt_text():
    return rules_prompt()


@pytest.mark.parametrize("source, words", [(f"def chop_tree(api):\n    {line.replace(chr(10), chr(10) + '    ')}\n"
                                            "    return True\n", w) for line, w in BREACHES.items()]
                         + list(TOP_LEVEL.items()), ids=list(BREACHES.values()) + list(TOP_LEVEL.values()))
def test_every_rule_the_checker_enforces_is_in_the_prompt_in_its_words(prompt_text, source, words):
    with pytest.raises(checker.SandboxError) as e:
        checker.check(source, "chop_tree")
    assert words in e.value.message
    shown = words.replace("._env", ".<name>").replace(".format", ".<name>").replace("'eval'", "'<name>'")
    shown = shown.replace("'len'", "'<name>'").replace("ClassDef", "<Name>").replace("With", "<Name>")
    shown = shown.replace("Import is", "<Name> is").replace("Global is", "<Name> is")
    assert shown in prompt_text, words


def test_the_prompt_allows_underscore_alone_as_the_checker_does(prompt_text):
    checker.check("def chop_tree(api):\n    for _ in range(3):\n        api.noop()\n    return True\n", "chop_tree")
    assert "`_` alone is allowed" in prompt_text and "`import` (Import)" in prompt_text
    assert "`.format`" not in prompt_text and ".format" in prompt_text  # listed among the denied attributes


def test_the_code_reply_cap_fits_the_longest_code_allowed_and_the_prompt_says_it(prompt_text):
    with FakeLLMServer([FIXED]) as srv:
        FastAgent(client(srv)).write(SUB, DOC)
    assert srv.requests[0].json["max_tokens"] == CODE_REPLY_TOKENS > 1024
    assert CODE_REPLY_TOKENS * 3 >= limits.MAX_SOURCE_CHARS  # 3 characters a token at least, for code
    assert f"cut off after {CODE_REPLY_TOKENS} tokens" in prompt_text


CHECK_FAIL = "```python\ndef chop_tree(api):\n    import os\n    return True\n```"
BUDGET_FAIL = "```python\ndef chop_tree(api):\n    while True:\n        api.noop()\n```"


@pytest.mark.parametrize("bad", [CHECK_FAIL, BUDGET_FAIL, "I cannot write that."])
def test_sub_action_falls_back_to_rl_after_n_failures(bad):
    with FakeLLMServer(lambda body: bad) as srv:
        agent = FastAgent(client(srv), max_attempts=3)
        assert agent.write(SUB, DOC) is None
    assert len(srv.requests) == 3 and len(agent.last_attempts) == 3
    assert all(a.error for a in agent.last_attempts)
    if bad == BUDGET_FAIL:
        assert "used all 64 environment steps" in srv.requests[1].json["messages"][-1]["content"]
    if bad == CHECK_FAIL:
        assert "Line 2 of your code is: import os" in srv.requests[1].json["messages"][-1]["content"]


def test_returning_false_in_the_dry_run_is_not_a_failure():
    with FakeLLMServer(["def chop_tree(api):\n    return api.nearest('diamond') is not None\n"]) as srv:
        action = FastAgent(client(srv)).write(SUB, DOC)
    assert action is not None and len(srv.requests) == 1


def test_transport_error_returns_none_and_is_recorded():
    with FakeLLMServer([http_error(401, "bad key")]) as srv:
        agent = FastAgent(client(srv))
        assert agent.write(SUB, DOC) is None
    assert len(srv.requests) == 1 and "LLM transport error" in agent.last_attempts[0].error


def test_extract_code_fenced_or_not():
    fn = "def chop_tree(api):\n    return True\n"
    assert extract_code(fn, "chop_tree") == fn
    assert extract_code("Sure! Here:\n\n" + fn, "chop_tree") == fn
    assert extract_code(f"```py\n{fn}```", "chop_tree") == fn
    two = f"First a helper:\n```python\ndef helper(api):\n    return 1\n```\nThen:\n```python\n{fn}```"
    assert extract_code(two, "chop_tree") == fn
    for fence in ("```python3", "```Python", "```py", "~~~python", "~~~", "```", "``` python"):
        close = fence[:3]
        assert extract_code(f"Here:\n{fence}\n{fn}{close}\nDone.", "chop_tree") == fn, fence
    assert extract_code(f"```text\nnotes\n```\n~~~py\n{fn}~~~", "chop_tree") == fn  # not the prose block
    assert extract_code(f"```python\n{fn}", "chop_tree") == fn  # never closed (cut off)


# ----------------------------------------------------------------------------------------------
# train.py: the critic's fix reaches the fast agent with the code it fixes.

FIRST_CHOP = "def chop_tree(api):\n    # FIRST-VERSION\n    return api.go_to('tree', 30) and api.do()\n"


def test_train_sends_the_code_being_fixed_and_its_statistics_with_the_critics_note(tmp_path, monkeypatch):
    import train  # the whole run: imported here so the module's other tests stay light

    def script(request: dict) -> str:
        system, user = request["messages"][0]["content"], request["messages"][-1]["content"]
        if system.startswith("You are the slow agent"):
            return json.dumps(plans.reference_plan("collect_wood"))
        if system.startswith("You are the critic"):
            return json.dumps({"summary": "s", "to_code": [], "to_rl": [], "fixes": {"chop_tree": "FIX-NOTE"}})
        if "FIX-NOTE" in user:
            return "```python\n" + FIRST_CHOP.replace("FIRST-VERSION", "SECOND-VERSION") + "```"
        return "```python\n" + FIRST_CHOP + "```"

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer(script) as srv:
        assert train.main(["--task", "collect_wood", "--llm", "http", "--llm-url", srv.url, "--llm-model", "fake",
                           "--iterations", "2", "--total-steps", "512", "--num-envs", "2", "--num-steps", "32",
                           "--eval-episodes", "1", "--no-capture-video", "--skills", "none", "--seed", "3",
                           "--runs-dir", str(tmp_path), "--run-name", "r"]) == 0
    (fix,) = [text_of(r) for r in srv.requests if "FIX-NOTE" in r.json["messages"][-1]["content"]
              and r.json["messages"][0]["content"].startswith("You write code actions")]
    assert FIRST_CHOP.strip() in fix  # the code the note is about
    row = json.loads((tmp_path / "r" / "iter_1" / "stats.json").read_text())["code_actions"]["chop_tree"]
    assert f"called {row['chosen']} times" in fix
    assert "SECOND-VERSION" in (tmp_path / "r" / "iter_2" / "skills" / "chop_tree_v2.py").read_text()


def test_the_whole_task_program_is_told_how_much_one_call_should_do():

    from code_actions import whole_task_subaction
    spec = whole_task_subaction("collect_wood", 64).spec
    assert "each call does the next step the inventory and the view allow" in spec and "64 env steps" in spec
