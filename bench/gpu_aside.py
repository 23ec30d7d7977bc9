"""Set the bundled models' weights aside from what a device call carries, and back
(`python -m attnmt.bench.gpu_aside aside|back|status`; docs/gpu.md says when).

A call to the lent GPU machine carries the working tree as `git ls-files -co --exclude-standard`
lists it (tracked files and untracked ones git does not ignore) plus what it names in `carry`, 64
MiB in all. The three bundled models' `weights.bin` are 51 MB of the 62 MB tree, so the pieces a
training stage or the serving checks need would leave a few MB a call. A training call needs no
bundled weights (its starting weights travel in a piece), and the serving checks need them only in
their last call.

`aside` takes each tracked `models/*/weights.bin` out of git's index (`git rm --cached`; the file
stays on disk) and lists the same paths in `.git/info/exclude`, so they are neither tracked nor
untracked-and-unignored: they do not travel. `back` undoes both (`git reset` of those paths), leaving
`git status` as it was. Nothing is committed either way; a commit made while the weights are aside
would delete them from the repository, so `aside` refuses when other changes are staged.

Written here because no git command does "leave these files out of a copy for a while" without
touching the files themselves.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

PATTERN = "models/*/weights.bin"
BEGIN, END = "# attnmt gpu_aside: begin", "# attnmt gpu_aside: end"
LIMIT = 64 * 2**20


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def repository() -> Path:
    """The repository the command runs in (the current directory's), which is what a device call
    sends: not necessarily the one this module was installed from."""
    return Path(git(Path.cwd(), "rev-parse", "--show-toplevel").strip())


def travelling(repo: Path) -> list[str]:
    """What a device call carries from the tree: tracked files and untracked ones git does not ignore."""
    return [n for n in git(repo, "ls-files", "-co", "--exclude-standard", "-z").split("\0") if n]


def travelling_bytes(repo: Path) -> int:
    return sum((repo / n).stat().st_size for n in travelling(repo) if (repo / n).is_file())


def _exclude(repo: Path) -> Path:
    path = Path(git(repo, "rev-parse", "--git-path", "info/exclude").strip())
    return path if path.is_absolute() else repo / path


def _without_block(text: str) -> str:
    lines, out, inside = text.splitlines(), [], False
    for line in lines:
        if line == BEGIN:
            inside = True
        elif line == END:
            inside = False
        elif not inside:
            out.append(line)
    return "".join(line + "\n" for line in out)


def aside_paths(repo: Path) -> list[str]:
    """The paths `aside` set aside (listed in the exclude block), or none."""
    path = _exclude(repo)
    text = path.read_text() if path.exists() else ""
    if BEGIN not in text:
        return []
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    return [line.lstrip("/") for line in block.splitlines() if line.strip()]


def aside(repo: Path) -> list[str]:
    """Leave the tracked weights out of what travels; returns their paths."""
    already = aside_paths(repo)
    if already:
        return already
    staged = git(repo, "diff", "--cached", "--name-only")
    if staged.strip():
        raise SystemExit(f"staged changes first: {staged.split()}; a commit made while the weights are aside "
                         "would delete them")
    paths = [n for n in git(repo, "ls-files", "-z", "--", PATTERN).split("\0") if n]
    if not paths:
        return []
    git(repo, "rm", "--cached", "-q", "--", *paths)
    path = _exclude(repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = path.read_text() if path.exists() else ""
    path.write_text(text + (BEGIN + "\n") + "".join(f"/{p}\n" for p in paths) + END + "\n")
    return paths


def back(repo: Path) -> list[str]:
    """Put the weights set aside back in git's index; returns their paths."""
    paths = aside_paths(repo)
    if paths:
        git(repo, "reset", "-q", "--", *paths)
    path = _exclude(repo)
    if path.exists():
        path.write_text(_without_block(path.read_text()))
    return paths


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=("aside", "back", "status"))
    args = p.parse_args(argv)
    repo = repository()
    if args.action == "aside":
        print("set aside:", ", ".join(aside(repo)) or "nothing")
    elif args.action == "back":
        print("back:", ", ".join(back(repo)) or "nothing was aside")
    size, now = travelling_bytes(repo), ", ".join(aside_paths(repo)) or "none"
    print(f"a device call carries {size:,} bytes of the tree ({size / 2**20:.1f} MiB), "
          f"{(LIMIT - size) / 2**20:.1f} MiB left for carried pieces; aside now: {now}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
