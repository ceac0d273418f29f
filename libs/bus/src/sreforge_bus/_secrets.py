"""The harness's secret values, and redacting them from anything that leaves.

The one place that knows what must never be published or recorded: every bus user's
password in the engine home's bus directory (`<user>.json`), every `<home>/*.token` file
(the trigger's webhook token, the dashboard's), the values of `SREFORGE_*` variables named
like a secret (`…TOKEN`, `…PASSWORD`, `…SECRET`, `…KEY`; not a path), and what the process
minted and registered with `guard_secret` (a run's Postgres superuser password). A value
shorter than `MIN_SECRET_CHARS` is never guarded, so it cannot redact ordinary text.

Checking is a handful of bytes `in` tests plus two `stat`s (the home is re-read only when
its directory changed): cheap enough for every published message.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from sreforge_contracts import ContractError, parse_event

from sreforge_bus._errors import SecretRefused

__all__ = [
    "MARKER",
    "MIN_SECRET_CHARS",
    "HarnessSecrets",
    "forget_secret",
    "guard_secret",
]

MARKER = "[redacted: harness secret]"
"""What stands in for a secret value: plain ASCII, so it is valid inside a JSON string."""

MIN_SECRET_CHARS = 16
"""Shorter values are not guarded (every minted secret is 32+ URL-safe characters)."""

_MAX_TOKEN_FILE_BYTES = 4096
_SECRET_WORDS = ("TOKEN", "PASSWORD", "SECRET", "KEY")
_NOT_A_VALUE = ("_FILE", "_PATH", "_DIR")

_minted: set[str] = set()
_minted_lock = threading.Lock()
_minted_version = 0

M = TypeVar("M", bound=BaseModel)


def guard_secret(value: str) -> None:
    """Guard `value` in this process from now on (a secret minted in memory, never on disk)."""
    global _minted_version
    if len(value) >= MIN_SECRET_CHARS:
        with _minted_lock:
            _minted.add(value)
            _minted_version += 1


def forget_secret(value: str) -> None:
    """Stop guarding a value `guard_secret` registered (its resource is gone)."""
    global _minted_version
    with _minted_lock:
        _minted.discard(value)
        _minted_version += 1


class HarnessSecrets:
    """The secret values of one engine home (and of this process), and their redaction.

    `HarnessSecrets()` guards only what the process registered with `guard_secret`.
    """

    def __init__(
        self,
        home: Path | None = None,
        bus_dir: Path | None = None,
        *,
        values: Iterable[str] = (),
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.home = home
        self.bus_dir = bus_dir if bus_dir is not None or home is None else home / "nats"
        self._given = tuple(values)
        self._environ = environ
        self._seen: tuple[object, ...] | None = None
        self._needles: tuple[bytes, ...] = ()

    @classmethod
    def of_home(cls, home: Path, bus_dir: Path | None = None) -> HarnessSecrets:
        """The secrets of the engine home `home` (bus credentials in `bus_dir`, default
        `home/nats`) and of the process environment."""
        return cls(home, bus_dir)

    def found_in(self, data: bytes) -> bool:
        """Whether any guarded value (raw or JSON-escaped) occurs in `data`."""
        return any(needle in data for needle in self._current())

    def redact(self, data: bytes) -> tuple[bytes, int]:
        """`data` with every guarded value replaced by `MARKER`, and how many were."""
        count = 0
        marker = MARKER.encode()
        for needle in self._current():
            found = data.count(needle)
            if found:
                count += found
                data = data.replace(needle, marker)
        return data, count

    def redact_text(self, text: str) -> tuple[str, int]:
        """`text` with every guarded value replaced by `MARKER`, and how many were."""
        data = text.encode("utf-8", "surrogatepass")
        if not self.found_in(data):
            return text, 0
        redacted, count = self.redact(data)
        return redacted.decode("utf-8", "surrogatepass"), count

    def redact_payload(self, subject: str, data: bytes) -> tuple[bytes, int]:
        """A message body with its secrets redacted, still what it was: JSON stays JSON, an
        event stays a valid event. `SecretRefused` when redacting would break it."""
        if not self.found_in(data):
            return data, 0
        redacted, count = self.redact(data)
        problem = _broken_by_redaction(data, redacted)
        if problem is not None:
            raise SecretRefused(
                f"publish to {subject!r} refused: the message carries a harness secret and "
                f"redacting it leaves {problem}"
            )
        return redacted, count

    def redact_model(self, model: M) -> tuple[M, int]:
        """`model` with its secrets redacted (re-validated: `SecretRefused` when redacting
        makes it invalid), and how many were."""
        data = model.model_dump_json().encode()
        if not self.found_in(data):
            return model, 0
        redacted, count = self.redact(data)
        try:
            return type(model).model_validate_json(redacted), count
        except ValidationError as error:
            raise SecretRefused(
                f"a {type(model).__name__} carries a harness secret and redacting it leaves "
                f"it invalid: {error.errors()[0]['msg']}"
            ) from None

    def _current(self) -> tuple[bytes, ...]:
        seen = (_minted_version, _stamp(self.home), _stamp(self.bus_dir))
        if seen != self._seen:
            self._needles = _needles(self._values())
            self._seen = seen
        return self._needles

    def _values(self) -> set[str]:
        with _minted_lock:
            values = {*self._given, *_minted}
        if self.bus_dir is not None:
            values.update(_bus_passwords(self.bus_dir))
        if self.home is not None:
            values.update(_token_files(self.home))
        environ = os.environ if self._environ is None else self._environ
        values.update(_env_secrets(environ))
        return {value for value in values if len(value) >= MIN_SECRET_CHARS}


def _stamp(directory: Path | None) -> object:
    if directory is None:
        return None
    try:
        found = directory.stat()
    except OSError:
        return None
    return (found.st_ino, found.st_mtime_ns)


def _needles(values: Iterable[str]) -> tuple[bytes, ...]:
    """Each value as it appears raw and inside JSON strings (escaped, ASCII or not); longest
    first, so a value containing another is replaced whole."""
    forms = set()
    for value in values:
        forms.add(value.encode("utf-8", "surrogatepass"))
        forms.add(json.dumps(value)[1:-1].encode())
        forms.add(json.dumps(value, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass"))
    return tuple(sorted(forms, key=len, reverse=True))


def _bus_passwords(bus_dir: Path) -> list[str]:
    passwords = []
    for path in _small_files(bus_dir, "*.json"):
        try:
            password = json.loads(path.read_bytes()).get("password")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(password, str):
            passwords.append(password)
    return passwords


def _token_files(home: Path) -> list[str]:
    tokens = []
    for path in _small_files(home, "*.token"):
        try:
            tokens.append(path.read_text(encoding="utf-8").strip())
        except (OSError, UnicodeDecodeError):
            continue
    return tokens


def _small_files(directory: Path, pattern: str) -> list[Path]:
    try:
        paths = sorted(directory.glob(pattern))
    except OSError:
        return []
    small = []
    for path in paths:
        try:
            if path.is_file() and path.stat().st_size <= _MAX_TOKEN_FILE_BYTES:
                small.append(path)
        except OSError:
            continue
    return small


def _env_secrets(environ: Mapping[str, str]) -> list[str]:
    # A path (`SREFORGE_AGENT_SSH_KEY` names the key's file) is where a secret is, not one.
    return [
        value
        for name, value in environ.items()
        if name.startswith("SREFORGE_")
        and any(word in name for word in _SECRET_WORDS)
        and not name.endswith(_NOT_A_VALUE)
        and not value.startswith(("/", "~"))
    ]


def _broken_by_redaction(original: bytes, redacted: bytes) -> str | None:
    """What redacting broke in a body (None: it is what it was: raw bytes, JSON or an event)."""
    try:
        json.loads(original)
    except ValueError:
        return None  # not JSON: raw bytes stay raw bytes
    try:
        json.loads(redacted)
    except ValueError as error:
        return f"invalid JSON ({error})"
    try:
        parse_event(original)
    except ContractError:
        return None  # JSON but no event: still JSON is all it was
    try:
        parse_event(redacted)
    except ContractError as error:
        return f"an invalid event ({str(error)[:300]})"
    return None
