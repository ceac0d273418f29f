"""The `sreforge` entry point."""

from __future__ import annotations

import pytest

from sreforge.cli import main


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """`sreforge --help` prints usage and succeeds, so operators can discover the verbs."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert "sreforge" in capsys.readouterr().out
