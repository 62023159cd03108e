"""The only door to LLMs: plain `requests` against the OpenAI chat-completions format.

OpenAI, vLLM, Ollama, LM Studio and llama.cpp's server all speak POST {base}/chat/completions, so one
small client covers them all without an SDK. What makes it worth a file is surviving real servers:
retries with backoff on 429/5xx/connection errors, clear errors for the ones retrying cannot fix,
structured output that degrades gracefully (json_schema -> json_object -> schema in the prompt), a
JSONL transcript of every call (llm_replay.ReplayClient answers a run's LLM calls from it).
llama.cpp's server for `--llm local` is started by llm_local.py.
What it tells the model about an unusable reply is worded in prompts/common.py.

Quick manual check (endpoint from RLGPT_LLM_URL / OPENAI_BASE_URL, model from RLGPT_LLM_MODEL,
key from OPENAI_API_KEY; llm_local.py does the same against llama.cpp with SmolLM2-135M):

    python llm.py "say hi"
    python llm.py --schema '{"properties": {"hi": {"type": "string", "maxLength": 30}}}' "greet me"
    python llm_local.py "say hi"
"""

from __future__ import annotations

import argparse
import base64
import email.utils
import hashlib
import json
import os
import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
import requests

from prompts.common import CUT_OFF, JSON_INSTRUCTION, NO_CHOICES, NOT_JSON, SCHEMA_MISMATCH
from replies import find_json

RETRYABLE_STATUS = {408, 409, 429}  # plus every 5xx
FORMAT_REJECTED = {400, 422, 500, 501}  # how servers refuse a response_format they cannot do
FORMATS = ("json_schema", "json_object", "prompt")  # structured-output modes, best first
# How servers say a request is longer than the model's context (llama.cpp: "exceeds the available context size",
# vLLM and OpenAI: "maximum context length", OpenAI's code "context_length_exceeded"): a 400 that is not about
# the response_format, so falling back to another format would only hide it.
CONTEXT_FULL = ("context size", "context length", "context_length", "context_size", "context window")
MAX_BACKOFF_S = 30.0  # cap of one exponential-backoff wait
MAX_RETRY_AFTER_S = 120.0  # a server asking for longer than this is treated as down


def too_long(body) -> bool:
    """An error body saying the request does not fit the model's context (CONTEXT_FULL)."""
    text = (body if isinstance(body, str) else json.dumps(body)).lower()
    return any(words in text for words in CONTEXT_FULL)


class LLMError(Exception):
    """Transport/server failure after retries, or a non-retryable HTTP error.

    The message says what to check (URL, model, key) and never contains the key."""


class LLMReplyError(LLMError):
    """The reply came but is unusable (not JSON, schema mismatch, empty choices, cut off at max_tokens).

    The message is written so it can be fed back to the model verbatim; `.problem` says the same to a
    user, without instructions meant for the model; `.text` is the unusable reply itself (None when
    there was none), so a caller can echo it back as the assistant's turn."""

    def __init__(self, message: str, problem: str | None = None, text: str | None = None):
        super().__init__(message)
        self.problem, self.text = problem or message, text


@dataclass
class Reply:
    text: str  # the assistant message content
    data: object | None  # parsed, schema-valid JSON when a schema was given
    usage: dict  # token counts as the server reported them ({} if it did not)
    model: str  # the model that answered, as the server named it
    latency_s: float  # wall time of the whole chat() call, retries included
    attempts: int  # HTTP requests made, retries and format fallbacks included


def configured_endpoint() -> str | None:
    """The base URL from the environment, so train.py can default to a real LLM only when one is set."""
    return os.environ.get("RLGPT_LLM_URL") or os.environ.get("OPENAI_BASE_URL") or None


def validate_url(url: str) -> str:
    """The URL without a trailing slash, or LLMError naming it: requests' own errors for a missing or
    misspelt scheme are tracebacks, and a typo should cost a sentence, not a run."""
    url = url.strip().rstrip("/")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as e:
        raise LLMError(f"the LLM URL {url!r} cannot be read ({e}); check --llm-url / RLGPT_LLM_URL") from None
    if any(c.isspace() for c in url):
        raise LLMError(f"the LLM URL {url!r} contains a space; check --llm-url / RLGPT_LLM_URL")
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        guess = url.split("://", 1)[-1]
        raise LLMError(f"the LLM URL {url!r} is not an http:// or https:// URL; "
                       f"did you mean 'http://{guess}'? (--llm-url / RLGPT_LLM_URL)")
    if parts.path.rstrip("/").endswith("/chat/completions"):
        raise LLMError(f"the LLM URL {url!r} is the chat endpoint itself; give its base, "
                       f"{url[:url.rindex('/chat/completions')]!r}")
    return url


def parse_json(text: str, schema: dict | None = None) -> object:
    """Find the JSON in a model's reply (repairing trailing commas, comments, single quotes, Python
    literals: see replies.py) and validate it against `schema`."""
    try:
        data = find_json(text)
    except ValueError as e:
        raise LLMReplyError(NOT_JSON.format(error=e), f"the reply is not valid JSON: {e}", text) from None
    if schema is not None:
        err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(data))
        if err is not None:
            where = "$" + "".join(f"[{p!r}]" for p in err.absolute_path)
            raise LLMReplyError(SCHEMA_MISMATCH.format(where=where, error=err.message),
                                f"the reply's JSON does not match the schema at {where}: {err.message}", text)
    return data


def request_hash(messages: list[dict], json_schema: dict | None, images: list[bytes] | None,
                 temperature: float, max_tokens: int) -> str:
    """Identify a call by what the caller asked, not by the wire format, so replay survives fallbacks."""
    key = {"messages": messages, "json_schema": json_schema, "temperature": temperature,
           "max_tokens": max_tokens, "images": [hashlib.sha256(b).hexdigest() for b in images or []]}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _retry_after(value: str | None) -> float | None:
    """Retry-After is either seconds or an HTTP date (RFC 9110); None if absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


class LLMClient:
    """Chat with an OpenAI-compatible server, surviving its faults and recording every call."""

    # What structured-output mode each endpoint accepted, shared by all clients of this process.
    _format_by_endpoint: dict[str, str] = {}

    def __init__(self, url: str | None = None, model: str | None = None, api_key: str | None = None, *,
                 transcript: str | Path | None = None, timeout: float = 120, connect_timeout: float = 10,
                 max_retries: int = 5, vision: bool = False, sleep=time.sleep, rng=random,
                 log: Callable[[str], None] | None = None):
        url = url or configured_endpoint()
        if not url:
            raise LLMError("no LLM endpoint: pass url= or set RLGPT_LLM_URL (or OPENAI_BASE_URL) to the "
                           "OpenAI-style base, e.g. http://127.0.0.1:8080/v1")
        self.url = validate_url(url)
        self.model = model or os.environ.get("RLGPT_LLM_MODEL") or None  # local servers need none
        self._key = api_key or os.environ.get("OPENAI_API_KEY") or None
        self.transcript = Path(transcript) if transcript else None
        self.timeout, self.connect_timeout, self.max_retries = timeout, connect_timeout, max_retries
        self.vision, self.sleep, self.rng = vision, sleep, rng
        # one line per retry and per refused response_format: a slow or flaky server is never silent
        self.log = log or (lambda line: print(line, file=sys.stderr))
        self.calls = 0
        self._session = requests.Session()
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # deliberately without the key
        return f"LLMClient(url={self.url!r}, model={self.model!r})"

    def chat(self, messages: list[dict], *, json_schema: dict | None = None,
             images: list[bytes] | None = None, temperature: float = 0.2, max_tokens: int = 1024) -> Reply:
        """One chat completion; with json_schema the reply's .data is parsed and schema-valid."""
        if images and not self.vision:
            raise LLMError("images were given but this client was built with vision=False; "
                           "use a vision model and pass vision=True")
        self.calls += 1
        t0 = time.monotonic()
        h = request_hash(messages, json_schema, images, temperature, max_tokens)
        record = {"request_hash": h, "messages": messages, "json_schema": json_schema,
                  "images_sha256": [hashlib.sha256(b).hexdigest() for b in images or []],
                  "temperature": temperature, "max_tokens": max_tokens}
        attempts = 0
        try:
            fmt = self._format_by_endpoint.get(self.url, FORMATS[0]) if json_schema else None
            while True:
                payload = self._payload(messages, images, json_schema, fmt, temperature, max_tokens)
                status, body, n = self._post(payload)
                attempts += n
                if fmt in ("json_schema", "json_object") and status in FORMAT_REJECTED and not too_long(body):
                    nxt = FORMATS[FORMATS.index(fmt) + 1]  # next best; a fluke 500 costs only the format
                    self.log(f"LLM: {self.url} refused response_format {fmt} (HTTP {status}); "
                             f"asking with {nxt if nxt != 'prompt' else 'the schema in the prompt'} instead")
                    fmt = nxt
                    continue
                break
            if status is None:
                raise LLMError(body)
            if status != 200:
                raise LLMError(self._http_error_text(status, body))
            if fmt:
                self._format_by_endpoint[self.url] = fmt
            text, usage, model = self._content(body, max_tokens)
            record.update(reply=text, model=model, usage=usage, format=fmt)
            try:
                data = parse_json(text, json_schema) if json_schema else None
            except LLMReplyError as e:  # the user must see who answered prose or off-schema JSON, not just what
                e.problem = f"{e.problem} (from {self.url}, model {model or '(the server default)'})"
                raise
            return Reply(text, data, usage, model, time.monotonic() - t0, attempts)
        except LLMError as e:
            record.update(error={"type": type(e).__name__, "message": str(e),
                                 "problem": getattr(e, "problem", str(e))})
            raise
        finally:
            record.update(latency_s=round(time.monotonic() - t0, 4), attempts=attempts)
            self._write(record)

    def check_reachable(self) -> None:
        """Fail fast, before a run spends minutes, if nothing listens at the URL. Only a refused or
        timed-out connection counts: any HTTP answer (even 401/404 on /models) means a server is there."""
        try:
            self._session.get(f"{self.url}/models", timeout=(self.connect_timeout, self.connect_timeout),
                              headers={"Authorization": f"Bearer {self._key}"} if self._key else {})
        except requests.RequestException as e:
            raise LLMError(f"cannot reach an LLM server at {self.url} ({type(e).__name__}): check that it is "
                           "running and that --llm-url / RLGPT_LLM_URL is its OpenAI-style /v1 base") from None

    def _payload(self, messages, images, schema, fmt, temperature, max_tokens) -> dict:
        """The wire request: images become data-URL parts, and the schema goes where `fmt` says."""
        msgs = [dict(m) for m in messages]
        extra = []
        if fmt in ("json_object", "prompt"):  # json_object carries no schema, so the prompt must
            extra.append({"type": "text", "text": JSON_INSTRUCTION.format(schema=json.dumps(schema))})
        extra += [{"type": "image_url", "image_url": {"url": "data:image/png;base64,"
                                                      + base64.b64encode(b).decode()}} for b in images or []]
        if extra:
            last = msgs[-1]
            if isinstance(last.get("content"), str) and not images:
                last["content"] += extra[0]["text"]
            else:
                content = last.get("content")
                parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
                last["content"] = list(parts) + extra
        payload = {"messages": msgs, "temperature": temperature, "max_tokens": max_tokens}
        if self.model:
            payload["model"] = self.model
        if fmt == "json_schema":
            payload["response_format"] = {"type": "json_schema",
                                          "json_schema": {"name": "reply", "schema": schema}}
        elif fmt == "json_object":
            payload["response_format"] = {"type": "json_object"}
        return payload

    def _post(self, payload: dict) -> tuple[int | None, object, int]:
        """POST with retries: (status, body, attempts); status None: gave up, body says why."""
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        last = ""
        for attempt in range(1, self.max_retries + 2):
            wait = None
            try:
                r = self._session.post(f"{self.url}/chat/completions", json=payload, headers=headers,
                                       timeout=(self.connect_timeout, self.timeout))
            except (requests.ConnectionError, requests.Timeout) as e:
                last = f"{type(e).__name__} talking to {self.url} (is the server running? is the URL right?)"
            except requests.RequestException as e:  # a body cut off or undecodable mid-transfer, ...
                last = f"{type(e).__name__} reading the answer of {self.url}: {self._scrub(str(e))[:200]}"
            else:
                if r.status_code == 200:
                    try:
                        return 200, r.json(), attempt
                    except ValueError:
                        last = (f"{self.url} answered 200 with a body that is not chat-completions JSON: "
                                f"{self._scrub(r.text[:200])!r}; check the URL is the OpenAI-style /v1 base")
                elif r.status_code in RETRYABLE_STATUS or r.status_code >= 500:
                    last = f"HTTP {r.status_code} from {self.url}: {self._scrub(r.text[:300])}"
                    wait = _retry_after(r.headers.get("Retry-After"))
                    if r.status_code in FORMAT_REJECTED and "response_format" in payload:
                        return r.status_code, r.text, attempt  # maybe the format, not an outage: fall back
                else:
                    return r.status_code, r.text, attempt
            if attempt > self.max_retries:
                break
            if wait is None:  # exponential backoff with "equal jitter": in [b/2, b]
                b = min(MAX_BACKOFF_S, 2.0 ** (attempt - 1))
                wait = b / 2 + self.rng.uniform(0, b / 2)
            elif wait > MAX_RETRY_AFTER_S:
                return None, f"{last}; the server asked to wait {wait:.0f}s (Retry-After), giving up", attempt
            self.log(f"LLM: {last.splitlines()[0][:160]}; retry {attempt}/{self.max_retries} in {wait:.1f}s")
            self.sleep(wait)
        return None, f"gave up after {self.max_retries + 1} attempts: {last}", self.max_retries + 1

    def _http_error_text(self, status: int, body) -> str:
        """Name the setting to check for each HTTP error, since the raw server text is often cryptic."""
        hint = {401: "check OPENAI_API_KEY (missing, wrong or expired)",
                403: "check OPENAI_API_KEY has access to this model",
                404: f"check the URL is the /v1 base (got {self.url}) and the model name ({self.model!r})",
                }.get(status, f"check the model name ({self.model!r}) and the request parameters")
        if too_long(body):
            hint = ("the request is longer than the model's context: serve it with a longer one (llama.cpp's "
                    "--ctx-size, vLLM's --max-model-len) or use a model with a longer context")
        text = body if isinstance(body, str) else json.dumps(body)
        return (f"HTTP {status} from {self.url}/chat/completions: {hint}. "
                f"Server said: {self._scrub(text[:300])}")

    def _content(self, body, max_tokens: int) -> tuple[str, dict, str]:
        """Pull text, usage and model out of a chat-completions body, refusing replies that are unusable."""
        if not isinstance(body, dict) or "choices" not in body:
            raise LLMError(f"{self.url} answered 200 but without 'choices': "
                           f"{self._scrub(str(body)[:200])!r}; check the URL is an OpenAI-style /v1 base")
        if not body["choices"]:
            raise LLMReplyError(NO_CHOICES, "the server returned no choices (an empty reply, possibly filtered)")
        choice = body["choices"][0]
        text = (choice.get("message") or {}).get("content") or ""
        if choice.get("finish_reason") == "length":
            raise LLMReplyError(CUT_OFF.format(n=max_tokens), f"the reply was cut off at max_tokens={max_tokens}")
        return text, body.get("usage") or {}, body.get("model") or self.model or ""

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def _write(self, record: dict) -> None:
        """Append one JSONL line; the key is scrubbed from it even if a caller put it in a message."""
        if self.transcript is None:
            return
        record = {"time": time.time(), "url": self.url, **record}
        line = self._scrub(json.dumps(record, default=str))
        with self._lock:
            self.transcript.parent.mkdir(parents=True, exist_ok=True)
            with self.transcript.open("a") as f:
                f.write(line + "\n")


def main(argv: list[str] | None = None, url: str | None = None) -> None:
    """One prompt to the configured endpoint (or `url`: llm_local.py passes its server's), reply printed."""
    p = argparse.ArgumentParser(description="Send one prompt to the configured LLM and print the reply.")
    p.add_argument("prompt")
    p.add_argument("--url", help="OpenAI-style base URL (default: $RLGPT_LLM_URL or $OPENAI_BASE_URL)")
    p.add_argument("--model", help="model name (default: $RLGPT_LLM_MODEL)")
    p.add_argument("--schema", help="a JSON schema the reply must match")
    p.add_argument("--max-tokens", type=int, default=256)
    args = p.parse_args(argv)
    try:
        client = LLMClient(url or args.url, args.model, log=lambda line: print(line, file=sys.stderr))
        client.check_reachable()  # nothing listening: say so now, not after a minute of silent retries
        schema = json.loads(args.schema) if args.schema else None
        reply = client.chat([{"role": "user", "content": args.prompt}], json_schema=schema,
                            max_tokens=args.max_tokens)
        print(reply.text if schema is None else json.dumps(reply.data, indent=2))
        print(f"[{reply.model} at {client.url}: {reply.latency_s:.2f}s, {reply.attempts} attempt(s), "
              f"usage {reply.usage}]")
    except (LLMError, ValueError) as e:  # ValueError: --schema is not JSON
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
