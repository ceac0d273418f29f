"""The `openai` rein: a minimal tool-calling agent over any OpenAI-compatible endpoint.

The loop runs on the runner's side, so the real key never enters the sandbox:
every model call goes from here to `<base_url>/chat/completions` (Ollama, vLLM, a
hosted API) and is logged to `<agent dir>/model-calls.jsonl` (time, latency,
token usage, tool calls; never the key). The model's tools act on the workspace:
`shell` runs inside the sandbox (bubblewrap when the profile says so),
`read_file` / `write_file` are confined to the workspace (paths resolved, symlinks
included), `submit` runs the sandbox's `submit`. Budgets: the first model answer
must come within `session_start_s`, each later answer or tool within `idle_s`, and
all of it within `total_s`; the one that fires is recorded.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from sreforge_confine import (
    UntrustedFileMissing,
    UntrustedFileRefused,
    read_untrusted,
    write_untrusted,
)
from sreforge_contracts import HarnessProfile, TimeoutKind

from sreforge_runner._agent_sandbox import AgentSandbox
from sreforge_runner._cli_agent import build_prompt
from sreforge_runner._errors import ProfileError, SessionError
from sreforge_runner._kept import seal_logs
from sreforge_runner._process import Budgets
from sreforge_runner._reins import Dispatch
from sreforge_runner._submit import has_submitted
from sreforge_runner._transcript import route_secrets, write_transcript

__all__ = ["MODEL_CALLS_FILE", "TOOLS", "OpenAIRein"]

MODEL_CALLS_FILE = "model-calls.jsonl"
_SYSTEM = "You are an on-call engineer. Use the tools to inspect and fix the code, then submit."
_OUTPUT_CAP = 12_000
_MAX_READ_BYTES = 16_000_000
_DEFAULT_STEPS = 40


def _tool(name: str, description: str, **params: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    key: {"type": "string", "description": d} for key, d in params.items()
                },
                "required": [key for key in params if key != "rca"],
            },
        },
    }


TOOLS = [
    _tool("shell", "Run a shell command in the repository.", command="the command"),
    _tool("read_file", "Read a file of the repository.", path="path relative to the repo"),
    _tool(
        "write_file",
        "Replace a file of the repository.",
        path="path relative to the repo",
        content="the whole new content",
    ),
    _tool("submit", "Hand the change over to CI and deployment.", rca="optional root-cause text"),
]
"""The tool definitions offered to the model (OpenAI function schema)."""


class _Budget(Exception):
    def __init__(self, kind: TimeoutKind) -> None:
        super().__init__(kind)
        self.kind = kind


@dataclass
class OpenAIRein:
    """A built-in agent loop: model on the host, tools in the sandbox."""

    profile: HarnessProfile
    page: str
    run_id: str = "run"
    _messages: list[dict[str, Any]] = field(default_factory=list, init=False, repr=False)
    _calls: int = field(default=0, init=False)
    _submitted: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if not self.profile.metadata.get("base_url"):
            raise ProfileError(f"agent {self.profile.name}: metadata.base_url is required")
        if not self.profile.model:
            raise ProfileError(f"agent {self.profile.name}: model is required")

    @property
    def name(self) -> str:
        """The profile's name."""
        return self.profile.name

    @property
    def session_env(self) -> Mapping[str, str]:
        """Nothing: the tools run with the sandbox's own env (the key stays runner-side)."""
        return {}

    async def start_session(self, sandbox: AgentSandbox) -> None:
        """The conversation starts with the page."""
        prompt = build_prompt(self.page, str(sandbox.inside(sandbox.workspace)))
        self._messages = [
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": prompt},
        ]

    async def dispatch(self, sandbox: AgentSandbox, budgets: Budgets) -> Dispatch:
        """Talk to the model and run its tools until it submits, stops, or a budget fires."""
        if not self._messages:
            raise SessionError(f"agent {self.name}: dispatch before start_session")
        started = time.monotonic()
        timeout: TimeoutKind | None = None
        reason = "exited"
        try:
            reason = await self._loop(sandbox, budgets, started)
        except _Budget as fired:
            timeout, reason = fired.kind, f"timeout:{fired.kind}"
        return Dispatch(
            stop_reason=reason,
            duration_ms=(time.monotonic() - started) * 1000,
            exit_code=0 if timeout is None else None,
            timeout=timeout,
        )

    async def end_session(self, sandbox: AgentSandbox) -> None:
        """Seal the logs and write the transcript (the tools' stamped output; the model
        calls are counted); `submitted` is the sentinel's, whichever tool ran `submit`."""
        secrets = route_secrets(self.profile.credential_routes)
        kept = seal_logs(sandbox.root, secrets)
        write_transcript(
            sandbox.root,
            run_id=self.run_id,
            harness=self.profile.name,
            model=self.profile.model,
            session=f"openai-{self.run_id}",
            confinement=sandbox.confinement,
            submitted=has_submitted(sandbox.workspace),
            secrets=secrets,
            profile_metadata=self.profile.metadata,
            files=[found.as_json() for found in kept],
        )

    async def cleanup_session(self, sandbox: AgentSandbox) -> None:
        """Drop the conversation (it holds model output)."""
        self._messages.clear()

    async def _loop(self, sandbox: AgentSandbox, budgets: Budgets, started: float) -> str:
        steps = int(self.profile.metadata.get("max_steps", _DEFAULT_STEPS))
        for _ in range(steps):
            limit = budgets.session_start_s if self._calls == 0 else budgets.idle_s
            kind: TimeoutKind = "session_start" if self._calls == 0 else "idle"
            reply = await self._ask(sandbox, _within(budgets, started, limit, kind))
            self._messages.append(reply)
            calls = reply.get("tool_calls") or []
            if not calls:
                return "stopped"
            for call in calls:
                result = await self._tool(sandbox, call, budgets, started)
                self._messages.append(
                    {"role": "tool", "tool_call_id": call.get("id", ""), "content": result}
                )
            if self._submitted or has_submitted(sandbox.workspace):  # `submit` from the shell too
                self._submitted = True
                return "submitted"
        return "max_steps"

    async def _ask(
        self, sandbox: AgentSandbox, within: tuple[float, TimeoutKind]
    ) -> dict[str, Any]:
        seconds, kind = within
        body = {"model": self.profile.model, "messages": self._messages, "tools": TOOLS}
        sent = time.monotonic()
        try:
            answer = await asyncio.wait_for(asyncio.to_thread(self._post, body, seconds), seconds)
        except TimeoutError:
            raise _Budget(kind) from None
        self._calls += 1
        self._log_call(sandbox, answer, time.monotonic() - sent)
        choices = answer.get("choices") or [{}]
        message = choices[0].get("message") or {}
        if not isinstance(message, dict):
            raise SessionError(f"agent {self.name}: the model's answer has no message")
        return {key: message[key] for key in ("role", "content", "tool_calls") if key in message}

    def _post(self, body: dict[str, Any], seconds: float) -> dict[str, Any]:
        url = self.profile.metadata["base_url"].rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json"}
        keys = route_secrets(self.profile.credential_routes)
        if keys:
            headers["Authorization"] = f"Bearer {next(iter(keys.values()))}"
        request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=seconds) as response:
                answer = json.loads(response.read())
        except TimeoutError:
            raise  # the socket's own deadline is the same budget as the caller's
        except urllib.error.URLError as error:
            if isinstance(error.reason, TimeoutError):
                raise TimeoutError(str(error.reason)) from None
            raise SessionError(f"agent {self.name}: model call to {url} failed: {error}") from None
        except (OSError, ValueError) as error:
            raise SessionError(f"agent {self.name}: model call to {url} failed: {error}") from None
        if not isinstance(answer, dict):
            raise SessionError(f"agent {self.name}: the model's answer is not an object")
        return answer

    def _log_call(self, sandbox: AgentSandbox, answer: dict[str, Any], latency_s: float) -> None:
        choices = answer.get("choices") or [{}]
        message = choices[0].get("message") or {}
        entry = {
            "t": datetime.now(UTC).isoformat(),
            "call": self._calls,
            "model": answer.get("model", self.profile.model),
            "latency_s": round(latency_s, 4),
            "usage": answer.get("usage"),
            "tool_calls": [
                (c.get("function") or {}).get("name") for c in message.get("tool_calls") or []
            ],
            "request_messages": len(self._messages),
            "response": message,
        }
        with (sandbox.root / MODEL_CALLS_FILE).open("a") as log:
            log.write(json.dumps(entry) + "\n")

    async def _tool(
        self, sandbox: AgentSandbox, call: dict[str, Any], budgets: Budgets, started: float
    ) -> str:
        function = call.get("function") or {}
        name = str(function.get("name", ""))
        try:
            args = json.loads(function.get("arguments") or "{}")
        except ValueError:
            return "error: arguments are not JSON"
        if not isinstance(args, dict):
            return "error: arguments must be an object"
        within = _within(budgets, started, budgets.idle_s, "idle")
        seconds = within[0]
        if name == "shell":
            return await self._shell(sandbox, str(args.get("command", "")), within)
        if name == "read_file":
            return _read(sandbox.workspace, str(args.get("path", "")))
        if name == "write_file":
            return _write(
                sandbox.workspace, str(args.get("path", "")), str(args.get("content", ""))
            )
        if name == "submit":
            return await self._submit(sandbox, args.get("rca"), seconds)
        return f"error: unknown tool {name!r}"

    async def _shell(
        self, sandbox: AgentSandbox, command: str, within: tuple[float, TimeoutKind]
    ) -> str:
        seconds, kind = within
        output = sandbox.root / "tool-output.log"
        output.unlink(missing_ok=True)
        outcome = await sandbox.run(["/bin/sh", "-c", command], seconds, log_path=output)
        text = output.read_text(errors="replace") if output.exists() else ""
        if outcome.timeout is not None:
            raise _Budget(kind)
        return f"exit code {outcome.exit_code}\n{_cap(text)}"

    async def _submit(self, sandbox: AgentSandbox, rca: object, seconds: float) -> str:
        argv = ["submit"]
        if isinstance(rca, str) and rca.strip():
            (sandbox.home / "rca.md").write_text(rca)
            argv += ["--rca", str(sandbox.inside(sandbox.home / "rca.md"))]
        outcome = await sandbox.run(argv, seconds)
        self._submitted = outcome.exit_code == 0
        return "Submitted." if self._submitted else f"submit failed ({outcome.exit_code})"


def _within(
    budgets: Budgets, started: float, limit: float | None, kind: TimeoutKind
) -> tuple[float, TimeoutKind]:
    """The seconds the next wait may take: its own limit or what is left of the total."""
    left = budgets.total_s - (time.monotonic() - started)
    if left <= 0:
        raise _Budget("total")
    if limit is None or left <= limit:
        return left, "total"
    return limit, kind


def _confined(relative: str) -> str | None:
    """`relative` as a plain path in the repository (no `..`, not absolute, not `.git`)."""
    path = PurePosixPath(relative)
    plain = bool(path.parts) and not path.is_absolute() and ".." not in path.parts
    return relative if plain and ".git" not in path.parts else None


def _read(workspace: Path, relative: str) -> str:
    # The workspace is the agent's: a link in it is refused, never followed by the host.
    target = _confined(relative)
    missing = f"error: no such file in the repository: {relative}"
    try:
        data = read_untrusted(workspace, target, cap=_MAX_READ_BYTES) if target else None
    except UntrustedFileMissing:
        return missing
    except UntrustedFileRefused as refused:
        return f"error: cannot read {relative}: {refused.reason}"
    return missing if data is None else _cap(data.decode(errors="replace"))


def _write(workspace: Path, relative: str, content: str) -> str:
    target = _confined(relative)
    if target is None:
        return f"error: {relative} is outside the repository"
    try:
        write_untrusted(workspace, target, content.encode(), make_parents=True)
    except UntrustedFileRefused as refused:
        return f"error: cannot write {relative}: {refused.reason}"
    return f"wrote {len(content)} characters to {relative}"


def _cap(text: str) -> str:
    if len(text) <= _OUTPUT_CAP:
        return text
    half = _OUTPUT_CAP // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"
