"""The hand-off tree: the base's test paths put back exactly, nothing written outside it."""

from __future__ import annotations

from pathlib import Path

from sreforge_deployer.gate import ChangedTests
from sreforge_deployer.gate._test_trees import restore_handoff, tree_entries


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_test_paths_become_the_bases_and_the_code_stays_submitted(tmp_path: Path) -> None:
    """Edited, deleted and added test paths are undone; a listed file and the code are kept."""
    base = _tree(
        tmp_path / "base",
        {
            "app/core.py": "OLD = 1\n",
            "pytest.ini": "[pytest]\n",
            "tests/test_a.py": "def test_a(): pass\n",
            "tests/test_kept.py": "def test_k(): pass\n",
            "tests/gone/test_g.py": "def test_g(): pass\n",
        },
    )
    tree = _tree(
        tmp_path / "tree",
        {
            "app/core.py": "NEW = 1\n",
            "app/conftest.py": "cheat = True\n",
            "pytest.ini": "[pytest]\npython_files = nothing_*.py\n",
            "tests/test_a.py": "import pytest\npytestmark = pytest.mark.skip\n",
            "tests/test_kept.py": "def test_k_changed(): pass\n",
            "tests/extra/test_new.py": "def test_new(): pass\n",
        },
    )
    complaints = restore_handoff(tree, base, ChangedTests.from_entries(["tests/test_kept.py"]))
    assert complaints == []
    assert tree_entries(tree) == [
        "app/core.py",
        "pytest.ini",
        "tests/gone/test_g.py",
        "tests/test_a.py",
        "tests/test_kept.py",
    ]
    assert (tree / "app/core.py").read_text() == "NEW = 1\n"
    assert (tree / "pytest.ini").read_text() == "[pytest]\n"
    assert (tree / "tests/test_a.py").read_text() == "def test_a(): pass\n"
    assert (tree / "tests/test_kept.py").read_text() == "def test_k_changed(): pass\n"
    assert not (tree / "tests/extra").exists()


def test_a_folder_made_a_symlink_is_not_written_through(tmp_path: Path) -> None:
    """Restoring into a symlinked folder would write outside the tree: it is refused."""
    base = _tree(tmp_path / "base", {"app/conftest.py": "BASE = 1\n", "app/core.py": ""})
    outside = tmp_path / "outside"
    outside.mkdir()
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "app").symlink_to(outside, target_is_directory=True)
    complaints = restore_handoff(tree, base, ChangedTests())
    assert complaints == ["app/conftest.py: not restored, app is a symlink in the submission"]
    assert list(outside.iterdir()) == []
