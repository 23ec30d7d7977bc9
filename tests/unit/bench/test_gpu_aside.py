"""The bundled weights set aside from what a device call carries, and back (bench/gpu_aside.py),
on a real git repository laid out as ours."""

import subprocess
from pathlib import Path

import pytest

from attnmt.bench import gpu_aside


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "t@example.org")
    git(tmp_path, "config", "user.name", "t")
    for name, size in (("models/a/weights.bin", 3000), ("models/b/weights.bin", 2000),
                       ("models/a/manifest.json", 10), ("service/x.py", 20)):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"w" * size)
    (tmp_path / ".gitignore").write_text("/.gpu*/\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "init")
    (tmp_path / "notes.txt").write_text("untracked, not ignored\n")
    return tmp_path


def test_aside_leaves_the_weights_out_of_what_travels_and_back_restores_everything(repo):
    status_before = git(repo, "status", "--porcelain")
    before = gpu_aside.travelling_bytes(repo)
    assert gpu_aside.aside(repo) == ["models/a/weights.bin", "models/b/weights.bin"]
    assert set(gpu_aside.travelling(repo)) == {".gitignore", "models/a/manifest.json", "service/x.py", "notes.txt"}
    assert gpu_aside.travelling_bytes(repo) == before - 5000
    assert (repo / "models/a/weights.bin").stat().st_size == 3000         # still on disk
    assert gpu_aside.aside(repo) == ["models/a/weights.bin", "models/b/weights.bin"]   # twice: the same
    assert gpu_aside.back(repo) == ["models/a/weights.bin", "models/b/weights.bin"]
    assert gpu_aside.travelling_bytes(repo) == before
    assert git(repo, "status", "--porcelain") == status_before
    assert "gpu_aside" not in (repo / ".git/info/exclude").read_text()
    assert gpu_aside.back(repo) == []


def test_aside_refuses_while_other_changes_are_staged(repo):
    (repo / "service/x.py").write_text("changed\n")
    git(repo, "add", "service/x.py")
    with pytest.raises(SystemExit, match="staged"):
        gpu_aside.aside(repo)
    assert "models/a/weights.bin" in gpu_aside.travelling(repo)


def test_a_weights_file_changed_on_disk_stays_changed_after_back(repo):
    (repo / "models/b/weights.bin").write_bytes(b"v" * 2000)
    gpu_aside.aside(repo)
    gpu_aside.back(repo)
    assert git(repo, "status", "--porcelain").split() == ["M", "models/b/weights.bin", "??", "notes.txt"]
