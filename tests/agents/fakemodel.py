"""A fake model server for the real agent programs: it records each request, answers from a script.

It stands in for the one thing these tests cannot have, a remote model. It speaks just enough of
four wire protocols for the agents to run their loop against it:

- Anthropic Messages (``POST /v1/messages``, streamed as server-sent events): Claude Code;
- OpenAI Responses (``POST /v1/responses``, streamed): Codex;
- Gemini ``generateContent`` / ``streamGenerateContent`` / ``countTokens``: Gemini CLI;
- OpenAI chat completions (``POST /v1/chat/completions``, streamed): OpenCode.

A request is the agent's *main loop* when its tool list holds the script's ``main_tool`` (the
agent's file-reading tool); each main request takes the script's next step, a tool call or a final
text. Other requests (titles, summaries, classifiers) get a short text and leave the script alone.
Every request is appended, in order, to the record file as one JSON line.

Run as a program it starts the server on 127.0.0.1 (random port), replaces ``@BASE@`` in the
command's arguments and in the values of ``FAKE_ENV_*`` variables with the server's base URL, runs
the command under a timeout and exits with its status. Run inside ``unshare -rn`` it first brings
the namespace's loopback up, so the agent can reach this server and nothing else.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class Script:
    """The steps the fake model answers with, taken in turn by the agent's main requests."""

    def __init__(self, data: dict[str, Any], record: Path) -> None:
        self.main_tool: str = data["main_tool"]
        self.steps: list[dict[str, Any]] = list(data["steps"])
        self.final: str = data.get("final", "Done.")
        self.record = record
        self.lock = threading.Lock()
        self.taken = 0
        self.count = 0

    def next_step(self, body: dict[str, Any], path: str, tools: list[str]) -> dict[str, Any]:
        """Record the request and return the step that answers it."""
        with self.lock:
            main = self.main_tool in tools
            step: dict[str, Any] = {"text": "OK."}
            index = -1
            if main:
                index = self.taken
                step = self.steps[index] if index < len(self.steps) else {"text": self.final}
                self.taken += 1
            self.count += 1
            line = {"n": self.count, "path": path, "main": main, "step": index, "tools": tools}
            line["body"] = body
            with self.record.open("a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")
            return step


def _tool_names(body: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if isinstance(tool.get("name"), str):  # Anthropic, Responses
            names.append(tool["name"])
        elif isinstance(tool.get("function"), dict):  # chat completions
            names.append(str(tool["function"].get("name")))
        for decl in tool.get("functionDeclarations") or []:  # Gemini
            names.append(str(decl.get("name")))
    return names


class Handler(BaseHTTPRequestHandler):
    """One request: find its protocol from its path, record it, answer the script's step."""

    server: Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self.server.script.next_step({}, self.path, [])
        if self.path.rstrip("/").endswith("/models"):
            self._json({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
        else:
            self._json({})

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        path = self.path.split("?")[0]
        if path.endswith(":countTokens"):
            self.server.script.next_step(body, self.path, [])
            self._json({"totalTokens": 100})
            return
        if path.endswith("/count_tokens"):
            self.server.script.next_step(body, self.path, [])
            self._json({"input_tokens": 100})
            return
        step = self.server.script.next_step(body, self.path, _tool_names(body))
        n = self.server.script.count
        if path.endswith("/messages"):
            self._anthropic(body, step, n)
        elif path.endswith("/responses"):
            self._responses(step, n)
        elif ":streamGenerateContent" in path or ":generateContent" in path:
            self._gemini(body, step, stream="streamGenerateContent" in path)
        elif path.endswith("/chat/completions"):
            self._chat(body, step, n)
        else:
            self._json({"error": {"message": f"fake model: no route {path}"}}, status=404)

    # -- plumbing ---------------------------------------------------------------------------

    def _json(self, payload: Any, status: int = 200) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: list[tuple[str | None, Any]]) -> None:
        chunks = []
        for name, payload in events:
            data = payload if isinstance(payload, str) else json.dumps(payload)
            chunks.append((f"event: {name}\n" if name else "") + f"data: {data}\n\n")
        data = "".join(chunks).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # -- Anthropic Messages -----------------------------------------------------------------

    def _anthropic(self, body: dict[str, Any], step: dict[str, Any], n: int) -> None:
        if "call" in step:
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": f"toolu_{n:04d}",
                "name": step["call"],
                "input": step["args"],
            }
            stop = "tool_use"
        else:
            block = {"type": "text", "text": step["text"]}
            stop = "end_turn"
        usage = {"input_tokens": 10, "output_tokens": 5}
        message = {
            "id": f"msg_{n:04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            self._json({**message, "content": [block], "stop_reason": stop})
            return
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        self._sse(
            [
                ("message_start", {"type": "message_start", "message": message}),
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": 0, "content_block": start},
                ),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": delta},
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": stop, "stop_sequence": None},
                        "usage": {"output_tokens": 5},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
        )

    # -- OpenAI Responses -------------------------------------------------------------------

    def _responses(self, step: dict[str, Any], n: int) -> None:
        rid = f"resp_{n:04d}"
        if "call" in step:
            item: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_{n:04d}",
                "call_id": f"call_{n:04d}",
                "name": step["call"],
                "arguments": json.dumps(step["args"]),
                "status": "completed",
            }
            if "namespace" in step:  # a tool Codex's tool_search exposed, in its namespace
                item["namespace"] = step["namespace"]
        elif "custom" in step:
            item = {
                "type": "custom_tool_call",
                "id": f"ctc_{n:04d}",
                "call_id": f"call_{n:04d}",
                "name": step["custom"],
                "input": step["input"],
                "status": "completed",
            }
        elif "search" in step:  # Codex's client-executed tool_search over its deferred tools
            item = {
                "type": "tool_search_call",
                "id": f"tsc_{n:04d}",
                "call_id": f"call_{n:04d}",
                "execution": "client",
                "arguments": {"query": step["search"]},
                "status": "completed",
            }
        else:
            item = {
                "type": "message",
                "id": f"msg_{n:04d}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": step["text"], "annotations": []}],
            }
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        response = {"id": rid, "object": "response", "status": "in_progress", "output": []}
        self._sse(
            [
                ("response.created", {"type": "response.created", "response": response}),
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": 0, "item": item},
                ),
                (
                    "response.completed",
                    {
                        "type": "response.completed",
                        "response": {
                            **response,
                            "status": "completed",
                            "output": [item],
                            "usage": usage,
                        },
                    },
                ),
            ]
        )

    # -- Gemini -----------------------------------------------------------------------------

    def _gemini(self, body: dict[str, Any], step: dict[str, Any], *, stream: bool) -> None:
        config = body.get("generationConfig") or {}
        if "call" in step:
            part: dict[str, Any] = {"functionCall": {"name": step["call"], "args": step["args"]}}
        elif config.get("responseMimeType") == "application/json" or config.get(
            "responseJsonSchema"
        ):
            # the CLI's own classifiers (next speaker, routing) ask for JSON: say the model is done
            part = {
                "text": json.dumps(
                    {"reasoning": "done", "next_speaker": "user", "model_choice": "flash"}
                )
            }
        else:
            part = {"text": step["text"]}
        payload = {
            "candidates": [
                {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": 10,
                "candidatesTokenCount": 5,
                "totalTokenCount": 15,
            },
            "modelVersion": "fake",
        }
        if stream:
            self._sse([(None, payload)])
        else:
            self._json(payload)

    # -- OpenAI chat completions ------------------------------------------------------------

    def _chat(self, body: dict[str, Any], step: dict[str, Any], n: int) -> None:
        cid = f"chatcmpl-{n:04d}"
        base = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": body.get("model", "fake"),
        }
        if "call" in step:
            call = {
                "index": 0,
                "id": f"call_{n:04d}",
                "type": "function",
                "function": {"name": step["call"], "arguments": json.dumps(step["args"])},
            }
            delta: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            delta = {"role": "assistant", "content": step["text"]}
            finish = "stop"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not body.get("stream"):
            message = {k: v for k, v in delta.items() if v is not None}
            self._json(
                {
                    **base,
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                }
            )
            return
        self._sse(
            [
                (None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
                (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
                (None, {**base, "choices": [], "usage": usage}),
                (None, "[DONE]"),
            ]
        )


class Server(ThreadingHTTPServer):
    """The fake model on 127.0.0.1 at a random port."""

    daemon_threads = True

    def __init__(self, script: Script) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.script = script

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


def _loopback_up() -> None:
    """In a fresh network namespace only ``lo`` exists, and it is down: bring it up."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", type=Path, required=True)
    parser.add_argument("--record", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--netns", action="store_true", help="bring loopback up first")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = [part for part in args.command if part != "--"]
    if args.netns:
        _loopback_up()
    script = Script(json.loads(args.script.read_text(encoding="utf-8")), args.record)
    server = Server(script)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = dict(os.environ)
    for name, value in os.environ.items():
        if name.startswith("FAKE_ENV_"):
            env[name.removeprefix("FAKE_ENV_")] = value.replace("@BASE@", server.base)
            del env[name]
    command = [part.replace("@BASE@", server.base) for part in command]
    # a runner stopped from outside still ends the agent and what it started (finally below)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    child = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        return child.wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        print(f"fake model: {command[0]} did not finish within {args.timeout} s", file=sys.stderr)
        return 124
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)  # the agent's MCP servers and hooks too
        child.wait()
        server.shutdown()


if __name__ == "__main__":
    sys.exit(main())
