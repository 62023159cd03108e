"""A scripted OpenAI-style chat-completions server on 127.0.0.1, for tests that need an LLM.

It is a real HTTP server (so the client's sockets, timeouts and headers are exercised), answering
POST /v1/chat/completions from a script:

    from tests.fake_llm import FakeLLMServer, rate_limited, truncated

    with FakeLLMServer(['{"plan": []}', rate_limited(retry_after=2), "hello"]) as srv:
        client = LLMClient(srv.url)            # srv.url is the /v1 base
        client.chat([{"role": "user", "content": "plan"}])
        assert srv.requests[0].json["messages"][0]["content"] == "plan"

`replies` is either a list, consumed one item per request, or a callable `(request_json) -> item`.
An item is the assistant's reply text, or a Fault built with the helpers below. When a list runs
out, the server answers HTTP 418 with a message saying so (non-retryable, so a test fails fast).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from llm import LLMClient


@dataclass
class Fault:
    """One scripted misbehaviour; build it with the helpers below rather than by hand."""

    status: int = 200  # HTTP status to answer
    text: str = ""  # assistant content when status is 200, else the error message
    finish_reason: str = "stop"
    delay_s: float = 0.0  # wait this long before answering (a slow server)
    headers: dict[str, str] = field(default_factory=dict)
    raw_body: str | None = None  # sent verbatim instead of a chat-completions body (garbage)
    empty_choices: bool = False
    reject_formats: tuple[str, ...] = ()  # see rejects_response_format
    cut_at: int | None = None  # send only this many bytes of the body, then hang up (see cut_body)


def rate_limited(retry_after: float | str | None = 1) -> Fault:
    """429 Too Many Requests, with a Retry-After header unless retry_after is None."""
    headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
    return Fault(status=429, text="rate limit exceeded", headers=headers)


def server_error(status: int = 500, message: str = "internal server error") -> Fault:
    return Fault(status=status, text=message)


def http_error(status: int, message: str = "bad request") -> Fault:
    """Any status with an OpenAI-style error body, e.g. 401 for a bad key or 404 for a bad model."""
    return Fault(status=status, text=message)


def slow(seconds: float, text: str = "slow reply") -> Fault:
    """Answer normally, but only after `seconds` (to trip the client's read timeout)."""
    return Fault(text=text, delay_s=seconds)


def garbage(body: str = "<html><body>502 Bad Gateway</body></html>") -> Fault:
    """HTTP 200 whose body is not chat-completions JSON, as some proxies send."""
    return Fault(raw_body=body)


def truncated(text: str = '{"plan": [') -> Fault:
    """A reply cut off at max_tokens: finish_reason "length"."""
    return Fault(text=text, finish_reason="length")


def cut_body(text: str = "cut", at: int = 40) -> Fault:
    """A body cut off mid-transfer: Content-Length announces the whole body, `at` bytes arrive, then
    the connection closes (a proxy or server dying while it answers)."""
    return Fault(text=text, cut_at=at)


def bad_encoding() -> Fault:
    """HTTP 200 that says Content-Encoding: gzip but is not gzip (a misconfigured proxy)."""
    return Fault(raw_body="this is not gzip", headers={"Content-Encoding": "gzip"})


def empty_choices() -> Fault:
    return Fault(empty_choices=True)


def rejects_response_format(text: str, formats: tuple[str, ...] = ("json_schema", "json_object"),
                            status: int = 400) -> Fault:
    """A server without structured output: requests whose response_format type is in `formats` get
    `status` and do NOT consume this item; the first request without one gets `text`."""
    return Fault(text=text, reject_formats=formats, status=status)


@dataclass
class Received:
    """One request as the server saw it."""

    path: str
    headers: dict[str, str]
    json: dict


class FakeLLMServer:
    """Context manager running the scripted server in a background thread on an OS-assigned port."""

    def __init__(self, replies: list | Callable[[dict], str | Fault], model: str = "fake-model"):
        self.replies = replies
        self.model = model
        self.requests: list[Received] = []
        self._script = list(replies) if not callable(replies) else None
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeLLMServer:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self, body: dict) -> str | Fault:
        """Pick the answer to `body`; a rejects_response_format item stays queued while it rejects."""
        with self._lock:
            if self._script is None:
                return self.replies(body)
            if not self._script:
                return Fault(status=418, text=f"FakeLLMServer: all {len(self.replies)} scripted replies used")
            item = self._script[0]
            rf = (body.get("response_format") or {}).get("type")
            if isinstance(item, Fault) and item.reject_formats and rf in item.reject_formats:
                return Fault(status=item.status, text=f"response_format {rf!r} is not supported")
            self._script.pop(0)
            if isinstance(item, Fault) and item.reject_formats:
                return item.text
            return item

    def _answer(self, item: str | Fault, body: dict) -> tuple[int, dict[str, str], bytes, int | None]:
        fault = item if isinstance(item, Fault) else Fault(text=item)
        if fault.delay_s:
            time.sleep(fault.delay_s)
        if fault.raw_body is not None:
            return fault.status, fault.headers, fault.raw_body.encode(), None
        if fault.status != 200:
            err = {"error": {"message": fault.text, "type": "fake_error", "code": fault.status}}
            return fault.status, fault.headers, json.dumps(err).encode(), None
        n_prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        n_out = len(fault.text.split())
        choices = [] if fault.empty_choices else [
            {"index": 0, "message": {"role": "assistant", "content": fault.text},
             "finish_reason": fault.finish_reason}]
        out = {"id": f"fake-{len(self.requests)}", "object": "chat.completion",
               "model": body.get("model") or self.model, "choices": choices,
               "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_out,
                         "total_tokens": n_prompt + n_out}}
        return 200, fault.headers, json.dumps(out).encode(), fault.cut_at

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparsed": raw.decode(errors="replace")}
                with server._lock:
                    server.requests.append(Received(self.path, dict(self.headers), body))
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    status, headers, payload, cut = 404, {}, b'{"error": {"message": "no such route"}}', None
                else:
                    status, headers, payload, cut = server._answer(server._next(body), body)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(payload[:cut])
                    self.close_connection = cut is not None
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (read timeout) before a slow answer came

            def log_message(self, *args) -> None:  # keep test output clean
                pass

        return Handler


def client(srv: FakeLLMServer, vision: bool = False) -> LLMClient:
    """The project's client on this server: no retries, no back-off sleeps."""
    return LLMClient(srv.url, "fake", max_retries=0, vision=vision, sleep=lambda s: None)


def text_of(request) -> str:
    """Every text part of every message of one request, images left out."""
    out = []
    for m in request.json["messages"]:
        content = m["content"]
        out += [content] if isinstance(content, str) else [p.get("text", "") for p in content]
    return "\n".join(out)
