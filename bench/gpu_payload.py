"""Build what a lent GPU machine lacks to run attnmt, in pieces that fit its transfers
(`python -m attnmt.bench.gpu_payload`; docs/gpu.md says how the pieces travel and are used).

The machine has Python 3.12, the CUDA 13 libraries as pip packages and a CPU-only onnxruntime;
nothing can be fetched there, and each call carries at most 64 MiB with the working tree (set the
bundled weights aside first: `make gpu-check-payload` does).
onnxruntime-gpu's wheel is 256 MB, 218 MB of it CUDA kernels for six GPU generations in its CUDA
provider library: the kernels of every generation but the target's (sm_90: H100, H200) are zeroed
in place, so the library keeps its layout and xz packs the zeros to nothing (60 MB all told).

Written by hand because no tool does it here: NVIDIA's nvprune works on object files and static
libraries, not on a shared library's .nv_fatbin section, and no CUDA toolkit is installed here.
The fatbin layout (a container header with magic 0xBA55ED50, then entries with their kind, header
size, payload size and SM version) is the one the CUDA runtime reads; entries are only zeroed,
never moved."""

from __future__ import annotations

import argparse
import collections
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from attnmt.bench.gpu_aside import LIMIT, repository, travelling_bytes

REPO = Path(__file__).resolve().parent.parent
FATBIN_MAGIC = 0xBA55ED50
# the serving requirements the machine's image lacks, or has too old (grpcio 1.84 there: the
# stubs need 1.85.1), pinned as deploy/requirements/gpu.txt pins them
WHEELS = ["annotated-types", "googleapis-common-protos", "grpcio", "grpcio-health-checking", "grpcio-reflection",
          "grpcio-status", "html5lib", "httptools", "orjson", "protobuf", "pydantic", "pydantic-core",
          "pydantic-settings", "python-dotenv", "python-multipart", "sentencex", "starlette", "typing-extensions",
          "typing-inspection", "uvicorn", "webencodings"]
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64", "manylinux_2_5_x86_64"]
DROPPED = ("onnxruntime/transformers", "onnxruntime/tools", "onnxruntime/quantization", "onnxruntime/datasets",
           "onnxruntime/ThirdPartyNotices.txt", "onnxruntime/capi/libonnxruntime_providers_tensorrt.so",
           # the C API library: the Python module does not link it (readelf -d), the CUDA provider neither
           "onnxruntime/capi/libonnxruntime.so.")


def fatbin_section(data: bytes | bytearray) -> tuple[int, int]:
    """Offset and size of an ELF64 file's .nv_fatbin section."""
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = sections[shstrndx][4]
    for name, _, _, _, offset, size in sections:
        if data[names + name:names + name + 11] == b".nv_fatbin\0":
            return offset, size
    raise ValueError("no .nv_fatbin section")


def fatbin_entries(data: bytes | bytearray, start: int, size: int):
    """(kind, sm, payload offset, payload size) of each entry: kind 1 is PTX, 2 machine code."""
    pos, end = start, start + size
    while pos < end:
        magic, _, header, container = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:
            pos += 8                       # containers are 8-byte aligned, with padding between
            continue
        entry, stop = pos + header, pos + header + container
        while entry < stop:
            kind, _, entry_header, payload = struct.unpack_from("<HHII", data, entry)
            sm = struct.unpack_from("<I", data, entry + 28)[0]
            yield kind, sm, entry + entry_header, payload
            entry += entry_header + payload
        pos = stop


def keep_only(library: Path, sm: int) -> dict:
    """Zero every fatbin entry of `library` but the machine code for `sm`; bytes by (kind, sm)."""
    data = bytearray(library.read_bytes())
    tally = zero_others(data, *fatbin_section(data), sm)
    library.write_bytes(data)
    return tally


def zero_others(data: bytearray, offset: int, size: int, sm: int) -> dict:
    """Zero, in `data`, the payload of every fatbin entry but the machine code for `sm`."""
    tally: collections.Counter = collections.Counter()
    for kind, entry_sm, start, payload in fatbin_entries(data, offset, size):
        tally[f"{'ptx' if kind == 1 else 'sass'}_sm{entry_sm}"] += payload
        if not (kind == 2 and entry_sm == sm):
            data[start:start + payload] = bytes(payload)
    if not tally.get(f"sass_sm{sm}"):
        raise ValueError(f"no machine code for sm_{sm} among the kernels: {dict(tally)}")
    return dict(tally)


def pinned(name: str) -> str:
    for line in (REPO / "deploy" / "requirements" / "gpu.txt").read_text().splitlines():
        if line.split("==")[0].strip().lower() == name:
            return line.split()[0]
    raise ValueError(f"{name} is not in deploy/requirements/gpu.txt")


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args, "-q", "--only-binary=:all:", "--python-version", "3.12",
                    "--implementation", "cp", *[f"--platform={p}" for p in PLATFORMS]], check=True)


def xz_tar(source: Path, out: Path, drop: tuple[str, ...] = ()) -> None:
    with tarfile.open(out, "w:xz", preset=9) as tar:
        for path in sorted(source.rglob("*")):
            name = path.relative_to(source).as_posix()
            if path.is_file() and "__pycache__" not in name and not any(name.startswith(d) for d in drop):
                tar.add(path, name, recursive=False)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sm", type=int, default=90, help="the GPU's SM version (90: H100, H200)")
    p.add_argument("--margin", type=int, default=4_600_000, help="bytes left free in each call's 64 MiB: the "
                   "device tool counts more than the files' bytes (150 kB free was refused, 3.6 MB passed), and "
                   "1 MB more lets the tree grow a little before the call")
    p.add_argument("--data", type=Path, default=REPO / "data" / "bible", help="its test split travels too")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="attnmt-gpu-"))
    pip("download", "--no-deps", "-d", str(work / "ort"), pinned("onnxruntime-gpu"))
    ort = work / "ort" / "unpacked"
    zipfile.ZipFile(next((work / "ort").glob("*.whl"))).extractall(ort)
    print("CUDA kernels by generation (bytes):", keep_only(ort / "onnxruntime" / "capi" /
                                                            "libonnxruntime_providers_cuda.so", args.sm))
    xz_tar(ort, work / "ort.tar.xz", DROPPED)
    pip("download", "--no-deps", "-d", str(work / "wheels"), *[pinned(n) for n in WHEELS])
    pip("install", "--no-deps", "--no-index", "--no-compile", "--target", str(work / "site"),
        *map(str, (work / "wheels").glob("*.whl")))
    xz_tar(work / "site", work / "site.tar.xz")
    repo = repository()
    capacity = LIMIT - travelling_bytes(repo) - args.margin
    pieces = [repo / f".gpu{i}" for i in range(1, 9)]
    for piece in pieces:
        shutil.rmtree(piece, ignore_errors=True)
    first = pieces[0]
    (first / "bible").mkdir(parents=True)
    for split in ("test.es", "test.en"):
        shutil.copy(args.data / split, first / "bible" / split)
    shutil.copy(work / "site.tar.xz", first / "site.tar.xz")
    room = capacity - sum(f.stat().st_size for f in first.rglob("*") if f.is_file())
    blob = (work / "ort.tar.xz").read_bytes()
    parts = [blob[:room]] + [blob[i:i + capacity] for i in range(room, len(blob), capacity)]
    for i, part in enumerate(parts):
        pieces[i].mkdir(exist_ok=True)
        (pieces[i] / f"ort.tar.xz.{i + 1}").write_bytes(part)
    shutil.rmtree(work)
    print(f"{len(parts)} pieces of at most {capacity:,} bytes: " + ", ".join(p.name for p in pieces[:len(parts)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
