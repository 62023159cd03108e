"""llm.py against the scripted FakeLLMServer: every fault, the JSON fallbacks, transcripts and replay."""

import base64
import email.utils
import gzip
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llm import (
    LLMClient,
    LLMError,
    LLMReplyError,
    _retry_after,
    configured_endpoint,
    parse_json,
    validate_url,
)
from llm_replay import ReplayClient
from tests.fake_llm import (
    FakeLLMServer,
    bad_encoding,
    cut_body,
    empty_choices,
    garbage,
    http_error,
    rate_limited,
    rejects_response_format,
    server_error,
    slow,
    truncated,
)

KEY = "sk-test-7f3a9c-DO-NOT-LEAK"
SCHEMA = {"type": "object", "properties": {"skill": {"type": "string"}, "steps": {"type": "integer"}},
          "required": ["skill", "steps"]}
USER = [{"role": "user", "content": "plan the next skill"}]
ROOT = Path(__file__).resolve().parents[1]


class FixedRng:
    """uniform() always returns its lower or upper bound, so backoff waits are exact."""

    def __init__(self, upper: bool):
        self.upper = upper

    def uniform(self, a, b):
        return b if self.upper else a


@pytest.fixture(autouse=True)
def fresh_format_memory(monkeypatch):
    """The per-endpoint format memory is process-wide; a reused port must not leak it between tests."""
    monkeypatch.setattr(LLMClient, "_format_by_endpoint", {})
    for var in ("RLGPT_LLM_URL", "OPENAI_BASE_URL", "RLGPT_LLM_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)


def client(srv, sleeps=None, **kw) -> LLMClient:
    sleeps = [] if sleeps is None else sleeps
    return LLMClient(srv.url, "test-model", KEY, sleep=sleeps.append, **kw)


def test_plain_chat_sends_openai_request_and_returns_reply():
    with FakeLLMServer(["hello there"]) as srv:
        c = client(srv)
        r = c.chat(USER, temperature=0.5, max_tokens=77)
    assert (r.text, r.data, r.model, r.attempts, c.calls) == ("hello there", None, "test-model", 1, 1)
    assert r.usage["completion_tokens"] == 2
    req = srv.requests[0]
    assert req.path == "/v1/chat/completions"
    assert req.headers["Authorization"] == f"Bearer {KEY}"
    assert req.json == {"model": "test-model", "messages": USER, "temperature": 0.5, "max_tokens": 77}


def test_no_key_sends_no_authorization_header():
    with FakeLLMServer(["hi"]) as srv:
        LLMClient(srv.url).chat(USER)
    assert "Authorization" not in srv.requests[0].headers
    assert "model" not in srv.requests[0].json  # local servers need no model name


def test_settings_come_from_the_environment(monkeypatch):
    assert configured_endpoint() is None
    with pytest.raises(LLMError, match="RLGPT_LLM_URL"):
        LLMClient()
    with FakeLLMServer(["a", "b"]) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url)
        assert configured_endpoint() == srv.url
        monkeypatch.setenv("RLGPT_LLM_URL", srv.url + "/")  # takes precedence, trailing slash tolerated
        monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
        monkeypatch.setenv("RLGPT_LLM_MODEL", "env-model")
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        c = LLMClient()
        assert c.chat(USER).text == "a"
        assert KEY not in repr(c)
    assert srv.requests[0].json["model"] == "env-model"
    assert srv.requests[0].headers["Authorization"] == f"Bearer {KEY}"


def test_429_retry_after_is_honoured():
    sleeps = []
    with FakeLLMServer([rate_limited(7), rate_limited("2.5"), "ok"]) as srv:
        r = client(srv, sleeps).chat(USER)
    assert (r.text, r.attempts, len(srv.requests)) == ("ok", 3, 3)
    assert sleeps == [7.0, 2.5]


def test_retry_after_http_date_and_junk():
    assert 55 <= _retry_after(email.utils.formatdate(time.time() + 60, usegmt=True)) <= 61
    assert _retry_after("garbage") is None and _retry_after(None) is None and _retry_after("0") == 0.0


def test_retry_after_too_long_gives_up_without_waiting():
    sleeps = []
    with FakeLLMServer([rate_limited(3600), "never"]) as srv, pytest.raises(LLMError, match="Retry-After"):
        client(srv, sleeps).chat(USER)
    assert sleeps == [] and len(srv.requests) == 1


@pytest.mark.parametrize("upper,expected", [(True, [1.0, 2.0, 4.0]), (False, [0.5, 1.0, 2.0])])
def test_5xx_exponential_backoff_bounds(upper, expected):
    sleeps = []
    with FakeLLMServer([server_error(500), server_error(502), server_error(503), "ok"]) as srv:
        r = client(srv, sleeps, rng=FixedRng(upper)).chat(USER)
    assert (r.text, r.attempts) == ("ok", 4)
    assert sleeps == expected


def test_backoff_jitter_is_random_within_bounds_and_capped():
    sleeps = []
    gave_up = pytest.raises(LLMError, match="gave up after 10 attempts")
    with FakeLLMServer([server_error()] * 10) as srv, gave_up:
        client(srv, sleeps, rng=random.Random(0), max_retries=9).chat(USER)
    assert len(srv.requests) == 10 and len(sleeps) == 9
    for wait, b in zip(sleeps, [1, 2, 4, 8, 16, 30, 30, 30, 30], strict=True):  # doubling from 1 s, capped at 30
        assert b / 2 <= wait <= b
    assert len(set(sleeps[:5])) == 5  # jitter: not a fixed schedule
    assert max(sleeps) <= 30.0


@pytest.mark.parametrize("status,hint", [(400, "model name"), (401, "OPENAI_API_KEY"),
                                         (403, "OPENAI_API_KEY"), (404, "the URL")])
def test_client_errors_are_not_retried_and_say_what_to_check(status, hint):
    sleeps = []
    echo = f"Incorrect API key provided: {KEY}"  # OpenAI really does echo (part of) the key
    with FakeLLMServer([http_error(status, echo), "never"]) as srv, pytest.raises(LLMError) as e:
        client(srv, sleeps).chat(USER)
    assert len(srv.requests) == 1 and sleeps == []
    msg = str(e.value)
    assert f"HTTP {status}" in msg and hint in msg and "Incorrect API key" in msg
    assert KEY not in msg
    assert not isinstance(e.value, LLMReplyError)


def test_connection_refused_is_retried_then_explained():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps = []
    c = LLMClient(f"http://127.0.0.1:{port}/v1", sleep=sleeps.append, max_retries=2)
    with pytest.raises(LLMError, match="gave up after 3 attempts.*is the server running"):
        c.chat(USER)
    assert len(sleeps) == 2


def test_read_timeout_is_retried():
    with FakeLLMServer([slow(1.5, "too late"), "in time"]) as srv:
        r = client(srv, timeout=0.3).chat(USER)
    assert (r.text, r.attempts, len(srv.requests)) == ("in time", 2, 2)


def test_garbage_body_is_retried_then_reported():
    with FakeLLMServer([garbage(), "fine"]) as srv:
        assert client(srv).chat(USER).attempts == 2
    with FakeLLMServer([garbage()] * 3) as srv, pytest.raises(LLMError) as e:
        client(srv, max_retries=2).chat(USER)
    assert "not chat-completions JSON" in str(e.value) and "502 Bad Gateway" in str(e.value)
    assert len(srv.requests) == 3


def test_empty_choices_is_a_reply_error():
    with FakeLLMServer([empty_choices(), "unused"]) as srv, pytest.raises(LLMReplyError, match="no choices"):
        client(srv).chat(USER)
    assert len(srv.requests) == 1


def test_truncated_reply_is_a_reply_error_the_model_can_act_on():
    with FakeLLMServer([truncated()]) as srv, pytest.raises(LLMReplyError) as e:
        client(srv).chat(USER, max_tokens=50)
    assert "cut off at the 50-token limit" in str(e.value) and len(srv.requests) == 1


def test_json_schema_request_and_tolerant_parse():
    reply = 'Sure! Here it is:\n```json\n{"skill": "collect_wood", "steps": 3}\n```\nGood luck.'
    with FakeLLMServer([reply]) as srv:
        r = client(srv).chat(USER, json_schema=SCHEMA)
    assert r.data == {"skill": "collect_wood", "steps": 3}
    rf = srv.requests[0].json["response_format"]
    assert rf == {"type": "json_schema", "json_schema": {"name": "reply", "schema": SCHEMA}}


def test_schema_mismatch_is_reported_for_the_model():
    bad = '{"skill": "x", "steps": "three"}'
    with FakeLLMServer([bad]) as srv, pytest.raises(LLMReplyError) as e:
        client(srv).chat(USER, json_schema=SCHEMA)
    assert "$['steps']" in str(e.value) and "'three' is not of type 'integer'" in str(e.value)
    assert e.value.text == bad  # so an agent can show the model its own reply


def test_response_format_fallback_is_remembered_per_endpoint():
    good = '{"skill": "a", "steps": 1}'
    with FakeLLMServer([rejects_response_format(good), good, good]) as srv:
        assert client(srv).chat(USER, json_schema=SCHEMA).attempts == 3
        formats = [r.json.get("response_format", {}).get("type") for r in srv.requests]
        assert formats == ["json_schema", "json_object", None]
        assert json.dumps(SCHEMA) in srv.requests[2].json["messages"][-1]["content"]  # schema moved to prompt
        r = client(srv).chat(USER, json_schema=SCHEMA)  # a new client, same endpoint: goes straight to prompt
        assert r.attempts == 1 and "response_format" not in srv.requests[3].json
    with FakeLLMServer([good]) as other:  # another endpoint starts from the best format again
        client(other).chat(USER, json_schema=SCHEMA)
        assert other.requests[0].json["response_format"]["type"] == "json_schema"


def test_500_on_json_schema_falls_back_to_json_object():
    good = '{"skill": "a", "steps": 1}'
    with FakeLLMServer([rejects_response_format(good, ("json_schema",), 500), good]) as srv:
        c = client(srv)
        assert c.chat(USER, json_schema=SCHEMA).attempts == 2
        c.chat(USER, json_schema=SCHEMA)
    formats = [r.json["response_format"]["type"] for r in srv.requests]
    assert formats == ["json_schema", "json_object", "json_object"]
    assert "JSON schema" in srv.requests[1].json["messages"][-1]["content"]  # json_object needs the prompt


def test_503_with_response_format_is_an_outage_not_a_format_problem():
    good = '{"skill": "a", "steps": 1}'
    sleeps = []
    with FakeLLMServer([server_error(503), good]) as srv:
        r = client(srv, sleeps).chat(USER, json_schema=SCHEMA)
    assert r.attempts == 2 and len(sleeps) == 1
    assert [q.json["response_format"]["type"] for q in srv.requests] == ["json_schema", "json_schema"]


def test_images_become_data_url_parts():
    png = b"\x89PNG\r\n\x1a\nfake-frame"
    with FakeLLMServer(["a tree"]) as srv:
        client(srv, vision=True).chat(USER, images=[png, png])
        content = srv.requests[0].json["messages"][-1]["content"]
        with pytest.raises(LLMError, match="vision=False"):
            client(srv).chat(USER, images=[png])
    assert len(srv.requests) == 1
    assert content[0] == {"type": "text", "text": USER[0]["content"]}
    assert [p["type"] for p in content] == ["text", "image_url", "image_url"]
    url = content[1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,") and base64.b64decode(url.split(",", 1)[1]) == png
    assert USER[0]["content"] == "plan the next skill"  # the caller's messages are not mutated


def test_transcript_records_every_call_and_never_the_key(tmp_path):
    path = tmp_path / "run" / "llm.jsonl"
    good = '{"skill": "a", "steps": 1}'
    script = [good, rate_limited(1), "plain", truncated(), http_error(401, f"bad key {KEY}")]
    with FakeLLMServer(script) as srv:
        c = client(srv, transcript=path)
        c.chat(USER, json_schema=SCHEMA)
        c.chat(USER + [{"role": "user", "content": f"my key is {KEY}"}])  # even a careless caller
        for _ in range(2):
            with pytest.raises(LLMError):
                c.chat(USER)
    assert all(r.headers["Authorization"] == f"Bearer {KEY}" for r in srv.requests)  # it was sent...
    for f in tmp_path.rglob("*"):  # ...but never written
        if f.is_file():
            assert KEY not in f.read_text()
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(recs) == 4 == c.calls
    assert recs[0]["reply"] == good and recs[0]["format"] == "json_schema" and recs[0]["usage"]
    assert recs[1]["attempts"] == 2 and recs[1]["messages"][-1]["content"] == "my key is ***"
    assert recs[2]["error"]["type"] == "LLMReplyError" and recs[3]["error"]["type"] == "LLMError"
    assert all(r["latency_s"] >= 0 and len(r["request_hash"]) == 16 for r in recs)


def record(tmp_path, script, calls):
    path = tmp_path / "t.jsonl"
    with FakeLLMServer(script) as srv:
        c = client(srv, transcript=path)
        for kwargs in calls:
            try:
                c.chat(**kwargs)
            except LLMReplyError:
                pass
    return path


def test_replay_in_order(tmp_path):
    calls = [dict(messages=USER, json_schema=SCHEMA), dict(messages=USER), dict(messages=USER),
             dict(messages=USER, json_schema=SCHEMA)]
    path = record(tmp_path, ['{"skill": "s", "steps": 2}', "two", truncated(), "not json"], calls)
    rc = ReplayClient(path, mode="order")
    assert rc.chat(USER, json_schema=SCHEMA).data == {"skill": "s", "steps": 2}
    assert rc.chat([{"role": "user", "content": "edited prompt"}]).text == "two"  # order ignores content
    with pytest.raises(LLMReplyError, match="cut off"):  # recorded errors replay too
        rc.chat(USER)
    with pytest.raises(LLMReplyError, match="did not contain valid JSON") as e:
        rc.chat(USER, json_schema=SCHEMA)
    assert e.value.text == "not json"
    with pytest.raises(LLMError, match="replay miss: call 5 .* only 4 records"):
        rc.chat(USER)
    assert rc.calls == 5


def test_replay_by_hash(tmp_path):
    ask = lambda text: [{"role": "user", "content": text}]
    calls = [dict(messages=ask("a")), dict(messages=ask("b")), dict(messages=ask("a"))]
    path = record(tmp_path, ["A1", "B", "A2"], calls)
    rc = ReplayClient(path, mode="hash")
    assert [rc.chat(ask(t)).text for t in ("b", "a", "a")] == ["B", "A1", "A2"]
    with pytest.raises(LLMError, match="replay miss: no unused record with request hash .*'a'"):
        rc.chat(ask("a"))  # both "a" answers used
    with pytest.raises(LLMError, match="replay miss"):
        rc.chat(ask("b"), temperature=0.9)  # same text, different settings: a different request


@pytest.mark.parametrize("mode", ["order", "hash"])
def test_a_replay_that_skips_the_calls_a_resumed_run_made_answers_the_next_one(tmp_path, mode):
    """--resume: calls made before the checkpoint were answered (by the first records in order; by hash, by those
    the run's own transcript names as answered_from): the next call gets the next answer, not the first."""
    ask = lambda text: [{"role": "user", "content": text}]
    path = record(tmp_path, ["A1", "B", "A2"], [dict(messages=ask("a")), dict(messages=ask("b")),
                                                dict(messages=ask("a"))])
    first = ReplayClient(path, mode=mode, record=tmp_path / "run.jsonl")
    assert [first.chat(ask("a")).text, first.chat(ask("b")).text] == ["A1", "B"]  # then the run stops
    resumed = ReplayClient(path, mode=mode, record=tmp_path / "run.jsonl")
    resumed.skip(2)
    assert resumed.chat(ask("a")).text == "A2"


def test_replay_reads_a_gzipped_transcript_and_records_what_it_answered(tmp_path):
    """bench/ablation keeps transcripts gzipped; the replay's own transcript counts like the original and shows a
    call that asked something other than what was recorded (request_hash against answered_from)."""
    path = record(tmp_path, ["one", "two"], [dict(messages=USER), dict(messages=USER)])
    gz = tmp_path / "t.jsonl.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    said = []
    rc = ReplayClient(gz, record=tmp_path / "replayed.jsonl", log=said.append)
    assert rc.chat(USER).text == "one" and said == []  # the recorded request: nothing to say
    assert [rc.chat([{"role": "user", "content": "edited"}]).text] == ["two"]
    assert len(said) == 1 and "call 2 does not ask what the transcript's call 2 asked" in said[0]  # said once
    old = [json.loads(line) for line in path.read_text().splitlines()]
    new = [json.loads(line) for line in (tmp_path / "replayed.jsonl").read_text().splitlines()]
    assert [r["usage"] for r in new] == [r["usage"] for r in old] and [r["reply"] for r in new] == ["one", "two"]
    assert [r["request_hash"] == r["answered_from"] for r in new] == [True, False]
    assert new[1]["messages"][0]["content"] == "edited"


def test_parse_json_is_tolerant_but_strict_about_the_schema():
    assert parse_json('[1, 2]') == [1, 2]
    assert parse_json('```\n{"a": 1}\n```') == {"a": 1}
    assert parse_json('The answer is {"a": {"b": [1]}} as requested.') == {"a": {"b": [1]}}
    assert parse_json('I think {not json} but then {"a": 2}') == {"a": 2}
    with pytest.raises(LLMReplyError, match="did not contain valid JSON"):
        parse_json("no json here")
    with pytest.raises(LLMReplyError, match="required property"):
        parse_json('{"skill": "x"}', SCHEMA)


def test_fake_server_accepts_a_callable_script():
    with FakeLLMServer(lambda req: req["messages"][-1]["content"].upper()) as srv:
        assert client(srv).chat(USER).text == "PLAN THE NEXT SKILL"


def test_cli_talks_to_the_configured_endpoint():
    with FakeLLMServer(["hi from the fake"]) as srv:
        env = {**os.environ, "RLGPT_LLM_URL": srv.url, "OPENAI_API_KEY": KEY}
        out = subprocess.run([sys.executable, str(ROOT / "llm.py"), "say hi"], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "hi from the fake" in out.stdout and KEY not in out.stdout
    assert srv.requests[0].json["messages"] == [{"role": "user", "content": "say hi"}]
    dead = {**env, "RLGPT_LLM_URL": "http://127.0.0.1:9/v1"}  # nothing listens: said at once, not after retries
    out = subprocess.run([sys.executable, str(ROOT / "llm.py"), "say hi"], env=dead, cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1 and "cannot reach an LLM server at http://127.0.0.1:9/v1" in out.stderr


# ----------------------------------------------------------------------------------------------
# What a new user meets: bad URLs, broken transfers, sloppy JSON, and a log that says what happens.


@pytest.mark.parametrize("url", ["127.0.0.1:8000/v1", "localhost:8000/v1", "htpp://127.0.0.1:8000/v1",
                                 "http:/127.0.0.1/v1", "ftp://example.com/v1", "http://[::1/v1",
                                 "http://host:80a/v1", "http://local host:8000/v1",
                                 "http://127.0.0.1:8000/v1/chat/completions"])
def test_a_url_without_http_scheme_is_a_sentence_naming_it(url):
    with pytest.raises(LLMError) as e:
        LLMClient(url)
    assert repr(url) in str(e.value) and "http://" in str(e.value)
    assert validate_url("https://api.openai.com/v1/") == "https://api.openai.com/v1"


@pytest.mark.parametrize("fault,words", [(cut_body, "IncompleteRead"), (bad_encoding, "gzip")])
def test_a_broken_transfer_is_retried_then_named_with_the_server(fault, words):
    with FakeLLMServer([fault(), "fine"]) as srv:
        assert client(srv).chat(USER).text == "fine"
    with FakeLLMServer([fault()] * 3) as srv, pytest.raises(LLMError) as e:
        client(srv, max_retries=2).chat(USER)
    msg = str(e.value)
    assert "gave up after 3 attempts" in msg and srv.url in msg and words in msg
    assert len(srv.requests) == 3


def test_retries_and_a_refused_format_each_leave_one_log_line():
    good = '{"skill": "a", "steps": 1}'
    log = []
    script = [server_error(503), rate_limited(2), rejects_response_format(good, ("json_schema",))]
    with FakeLLMServer(script) as srv:
        LLMClient(srv.url, sleep=lambda s: None, log=log.append).chat(USER, json_schema=SCHEMA)
    assert len(log) == 3, log
    assert "HTTP 503" in log[0] and "retry 1/5" in log[0] and srv.url in log[0]
    assert "HTTP 429" in log[1] and "retry 2/5 in 2.0s" in log[1]
    assert "refused response_format json_schema" in log[2] and "json_object" in log[2]


LLAMACPP_FULL = ('{"error":{"code":400,"message":"request (5028 tokens) exceeds the available context size (4096 '
                 'tokens), try increasing it","type":"exceed_context_size_error"}}')
VLLM_FULL = ('{"object":"error","message":"This model\'s maximum context length is 4096 tokens. However, you '
             'requested 5028 tokens.","type":"BadRequestError","code":400}')


@pytest.mark.parametrize("body", [LLAMACPP_FULL, VLLM_FULL])
def test_a_request_longer_than_the_context_is_named_not_taken_for_a_refused_format(body):
    """llama.cpp and vLLM answer 400 to a prompt past the model's context: asking again in another response_format
    would send the same prompt (and log a format refusal that never happened); the error says what to change."""
    log = []
    with FakeLLMServer([http_error(400, body)] * 3) as srv, pytest.raises(LLMError) as e:
        LLMClient(srv.url, sleep=lambda s: None, log=log.append).chat(USER, json_schema=SCHEMA)
    assert len(srv.requests) == 1 and log == []
    assert "longer than the model's context" in str(e.value) and "--ctx-size" in str(e.value)
    assert "5028 tokens" in str(e.value)  # and the server's own words


SLOPPY = """Here is the plan:
```json
{
  // the plan
  'skill': 'chop "big" tree',  /* single quotes */
  "steps": 3,
  "done": False, "note": None, "ok": True,
}
```"""


def test_sloppy_json_is_repaired():
    data = parse_json(SLOPPY)
    assert data == {"skill": 'chop "big" tree', "steps": 3, "done": False, "note": None, "ok": True}
    assert parse_json("~~~\n[1, 2,]\n~~~") == [1, 2]
    assert parse_json('{"url": "http://x//y # not a comment", "s": "it\'s, ]"}') == {
        "url": "http://x//y # not a comment", "s": "it's, ]"}


def test_broken_json_names_the_real_problem_not_an_inner_fragment():
    broken = 'Plan:\n{"subactions": [],\n "rl_config": {}\n "subtasks": []}'
    with pytest.raises(LLMReplyError) as e:
        parse_json(broken, {"type": "object", "required": ["subtasks"]})
    assert "Expecting ',' delimiter at line 3 column 2" in str(e.value) and "schema" not in str(e.value)
    assert e.value.problem.startswith("the reply is not valid JSON") and "Reply" not in e.value.problem
    assert e.value.text == broken


def test_reply_errors_carry_a_problem_for_the_user_without_instructions_to_the_model():
    with FakeLLMServer([truncated(), '{"skill": 1}']) as srv:
        c = client(srv)
        with pytest.raises(LLMReplyError) as cut:
            c.chat(USER, max_tokens=50)
        with pytest.raises(LLMReplyError) as off:
            c.chat(USER, json_schema=SCHEMA)
    for e in (cut.value, off.value):
        assert "Reply" in str(e)  # fed back to the model
        assert "Reply" not in e.problem and "Your" not in e.problem  # shown to the user
    assert off.value.text == '{"skill": 1}'
