"""vLLM's token-in/token-out route ``POST /inference/v1/generate`` on loopback, for tests.

verifiers' train client (and prime-rl) sample through that route: the client renders the prompt
to token ids and reads back the completion's token ids and log-probs. ``pettingllm serve`` does
not serve it, so this forwards each request to its ``/v1/completions`` (prompt as token ids,
``return_token_ids``, ``logprobs``: the model samples and scores for real) and answers in
vLLM's shape. Every exchange is kept in ``calls`` (prompt ids, completion ids, log-probs).
"""

from __future__ import annotations

import json
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class GenerateRoute:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.calls: list[dict[str, Any]] = []
        route = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, payload: dict[str, Any]) -> None:
                body = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                with urllib.request.urlopen(route.upstream + "/models", timeout=30) as response:
                    self._send(json.loads(response.read()))

            def do_POST(self) -> None:
                if self.path != "/inference/v1/generate":
                    self.send_error(404)
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self._send(route.generate(body))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def generate(self, body: dict[str, Any]) -> dict[str, Any]:
        sampling = body.get("sampling_params", {})
        request = {"model": body["model"], "prompt": body["token_ids"], "max_tokens": sampling.get("max_tokens", 16),
                   "temperature": sampling.get("temperature", 1.0), "logprobs": 1, "return_token_ids": True}
        data = json.dumps(request).encode()
        upstream = urllib.request.Request(self.upstream + "/completions", data=data,
                                          headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(upstream, timeout=120) as response:
            choice = json.loads(response.read())["choices"][0]
        ids, logprobs = choice["token_ids"], choice["logprobs"]["token_logprobs"]
        self.calls.append({"prompt_ids": list(body["token_ids"]), "completion_ids": ids, "logprobs": logprobs})
        content = [{"token": f"token_id:{i}", "logprob": lp} for i, lp in zip(ids, logprobs, strict=True)]
        return {"request_id": f"generate-{len(self.calls)}", "prompt_token_ids": body["token_ids"],
                "choices": [{"index": 0, "token_ids": ids, "logprobs": {"content": content},
                             "finish_reason": choice["finish_reason"]}]}

    def __enter__(self) -> GenerateRoute:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
