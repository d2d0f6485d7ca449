"""A fake OpenAI-compatible chat server for tests: `/v1/chat/completions` answering a fixed number, with logprobs.

`FakeOpenAI(answer="3", logprobs=[...], ids=False)` serves on 127.0.0.1 (a free port) in a thread; `url` is the
`base_url` to give ChatOpenAI. With `logprobs` set, a request that asks for them (`"logprobs": true`) gets one
`{token, logprob}` per character of the answer (tokens as `token_id:N` when `ids`); `requests` holds every body
received.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional


class FakeOpenAI:
    """The server; use as a context manager (stopped on exit)."""

    def __init__(self, answer: str = "3", logprobs: Optional[list[float]] = None, ids: bool = False) -> None:
        self.answer, self.logprobs, self.ids = answer, logprobs, ids
        self.fail = False  # True: every request is answered 503 (a server that is up but cannot answer)
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                data = json.dumps({"error": {"message": "overloaded"}} if fake.fail else fake.reply(body)).encode()
                self.send_response(503 if fake.fail else 200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """An OpenAI chat completion answering `answer`, with its logprobs where asked and configured."""
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": self.answer}}
        if body.get("logprobs") and self.logprobs is not None:
            tokens = [f"token_id:{100 + i}" if self.ids else ch for i, ch in enumerate(self.answer)]
            choice["logprobs"] = {"content": [{"token": t, "logprob": lp, "bytes": None, "top_logprobs": []}
                                              for t, lp in zip(tokens, self.logprobs)]}
        return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": body.get("model", "fake"),
                "choices": [choice],
                "usage": {"prompt_tokens": 10, "completion_tokens": len(self.answer), "total_tokens": 10 + len(self.answer)}}

    def __enter__(self) -> "FakeOpenAI":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
