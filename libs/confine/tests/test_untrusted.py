"""Reading files an agent controls: no link followed, nothing but a regular file, capped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sreforge_confine import (
    UntrustedFileMissing,
    UntrustedFileRefused,
    is_untrusted_file,
    open_untrusted,
    read_untrusted,
    write_untrusted,
)

SECRET = b"operator-credential"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A host file outside the agent's root: what a link would point at."""
    path = tmp_path / "engine-home" / "operator.json"
    path.parent.mkdir()
    path.write_bytes(SECRET)
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The agent's folder, with one plain file."""
    folder = tmp_path / "workspace"
    (folder / ".oncall").mkdir(parents=True)
    (folder / ".oncall" / "rca.md").write_bytes(b"the cache was off")
    return folder


def test_a_plain_file_is_read(root: Path) -> None:
    """The honest case still works, with and without a folder on the way."""
    assert read_untrusted(root, ".oncall/rca.md", cap=100) == b"the cache was off"
    with open_untrusted(root, ".oncall/rca.md") as handle:
        assert handle.read(3) == b"the"
    assert is_untrusted_file(root, ".oncall/rca.md")


def test_an_absolute_symlink_as_last_component_is_refused(root: Path, secret: Path) -> None:
    """The leak that was found: `.oncall/rca.md` pointing at the bus credential."""
    (root / ".oncall" / "rca.md").unlink()
    (root / ".oncall" / "rca.md").symlink_to(secret)
    with pytest.raises(UntrustedFileRefused, match=r"rca\.md is a symbolic link"):
        read_untrusted(root, ".oncall/rca.md", cap=100)
    assert not is_untrusted_file(root, ".oncall/rca.md")


def test_a_relative_symlink_as_last_component_is_refused(root: Path, secret: Path) -> None:
    """A relative link is a link too, even one that stays inside the root."""
    (root / "inside.md").write_bytes(b"fine")
    (root / ".oncall" / "rca.md").unlink()
    (root / ".oncall" / "rca.md").symlink_to("../inside.md")
    with pytest.raises(UntrustedFileRefused, match="symbolic link"):
        read_untrusted(root, ".oncall/rca.md", cap=100)
    (root / "escape.md").symlink_to(os.path.relpath(secret, root))
    with pytest.raises(UntrustedFileRefused, match="symbolic link"):
        read_untrusted(root, "escape.md", cap=100)


def test_a_symlinked_parent_folder_is_refused(root: Path, secret: Path) -> None:
    """A link on the way (`.oncall` → the engine home) is refused, not walked through."""
    (root / "linked").symlink_to(secret.parent)
    with pytest.raises(UntrustedFileRefused, match="linked is a symbolic link"):
        read_untrusted(root, "linked/operator.json", cap=100)
    assert not is_untrusted_file(root, "linked/operator.json")


@pytest.mark.timeout(10)
def test_a_fifo_is_refused_without_blocking(root: Path) -> None:
    """A FIFO with no writer would hang a plain open; here it is refused at once."""
    os.mkfifo(root / ".oncall" / "pipe")
    with pytest.raises(UntrustedFileRefused, match="not a regular file \\(a FIFO\\)"):
        read_untrusted(root, ".oncall/pipe", cap=100)
    assert not is_untrusted_file(root, ".oncall/pipe")


@pytest.mark.timeout(10)
def test_dev_zero_is_refused_through_a_link_and_as_a_device(root: Path) -> None:
    """An endless device is never read, whether linked to or reached as itself."""
    (root / "zero").symlink_to("/dev/zero")
    with pytest.raises(UntrustedFileRefused, match="symbolic link"):
        read_untrusted(root, "zero", cap=100)
    with pytest.raises(UntrustedFileRefused, match="a character device"):
        read_untrusted(Path("/dev"), "zero", cap=100)


def test_a_folder_is_refused(root: Path) -> None:
    """A folder at the file's name is not a file."""
    with pytest.raises(UntrustedFileRefused, match="a folder"):
        read_untrusted(root, ".oncall", cap=100)


def test_an_oversized_file_is_refused_not_cut(root: Path) -> None:
    """Over the cap is refused whole; a cut file could pass for a complete one."""
    (root / "big").write_bytes(b"x" * 101)
    with pytest.raises(UntrustedFileRefused, match="101 bytes, over 100"):
        read_untrusted(root, "big", cap=100)
    assert read_untrusted(root, "big", cap=101) == b"x" * 101


@pytest.mark.parametrize("relative", ["../engine-home/operator.json", "/etc/passwd", "a/../../x"])
def test_a_path_escaping_the_root_is_refused(root: Path, secret: Path, relative: str) -> None:
    """`..` and absolute paths never leave the root, even where they would resolve."""
    with pytest.raises(UntrustedFileRefused, match="not a plain relative path"):
        read_untrusted(root, relative, cap=100)


def test_a_missing_file_is_its_own_refusal(root: Path) -> None:
    """Missing is the common case callers treat as nothing there."""
    with pytest.raises(UntrustedFileMissing, match="missing"):
        read_untrusted(root, ".oncall/submitted", cap=100)
    with pytest.raises(UntrustedFileMissing):
        read_untrusted(root, "nowhere/submitted", cap=100)


def test_a_write_replaces_a_link_instead_of_writing_through_it(root: Path, secret: Path) -> None:
    """`.git/info/exclude` linked to a host file: the link is replaced, the host file kept."""
    (root / "exclude").symlink_to(secret)
    write_untrusted(root, "exclude", b"/.oncall/\n")
    assert secret.read_bytes() == SECRET
    assert not (root / "exclude").is_symlink()
    assert (root / "exclude").read_bytes() == b"/.oncall/\n"


def test_a_write_refuses_a_linked_parent_and_makes_missing_ones(root: Path, secret: Path) -> None:
    """Folders made on the way are made in the root, never through a link."""
    (root / ".git").symlink_to(secret.parent)
    with pytest.raises(UntrustedFileRefused, match=r"\.git is a symbolic link"):
        write_untrusted(root, ".git/info/exclude", b"x", make_parents=True)
    assert sorted(p.name for p in secret.parent.iterdir()) == ["operator.json"]
    write_untrusted(root, "made/info/exclude", b"x", make_parents=True)
    assert (root / "made" / "info" / "exclude").read_bytes() == b"x"
