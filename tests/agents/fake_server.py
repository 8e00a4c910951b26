"""A local OpenAI-compatible server for tests: answers POST /v1/chat/completions with a
scripted sequence of behaviours, on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def completion(message: dict[str, Any]) -> dict[str, Any]:
    return {"id": "cmpl-1", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": None, "tool_calls": [{"id": "x1", "type": "function",
                                             "function": {"name": name, "arguments": json.dumps(arguments)}}]}


class FakeServer:
    """`script(request_body) -> ("ok", message) | ("error", status) | ("sleep", seconds)`."""

    def __init__(self, script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                kind, value = server.script(body)
                if kind == "sleep":
                    time.sleep(value)
                    kind, value = "ok", {"content": "late"}
                if kind == "error":
                    payload = json.dumps({"error": {"message": "boom"}}).encode()
                    self.send_response(value)
                else:
                    payload = json.dumps(completion(value)).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except OSError:
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
