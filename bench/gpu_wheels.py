"""The wheels that travel to the GPU machine for bench/gpu_device.sh: checked before the trip, unpacked there.

  python bench/gpu_wheels.py preflight DIR   where the wheels were downloaded: one line per problem, exit 1
  python bench/gpu_wheels.py unpack DIR      on the GPU machine: the wheels this Python lacks at their version
  python bench/gpu_wheels.py imports         what the workflow imports: each failure's last line, exit 1

The preflight checks DIR against bench/gpu_wheels.txt (what travels), envs/base.lock (the versions the
workflow runs here) and bench/gpu_machine_packages.txt (what the GPU machine has): every package once,
at its pinned version; every wheel for CPython 3.12 on x86-64 Linux (manylinux); every package that the
check imports, or that a travelling package asks for, either travelling or on the machine at a version
that satisfies it (a version the machine's list does not give may be too old: it must travel); nothing
that travels without a use; and the checkout and DIR together under the 64 MiB that may be copied.

`unpack` and `imports` run on the GPU machine's own Python: standard library only.
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import re
import subprocess
import sys
import traceback
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PINS = REPO / "bench" / "gpu_wheels.txt"
LOCK = REPO / "envs" / "base.lock"
MACHINE = REPO / "bench" / "gpu_machine_packages.txt"
CARRY_LIMIT = 64 * 2**20  # what one call may copy to the GPU machine: the checkout and the named folders
# What the workflow imports for the check's targets (the tables and the findings; no charts there),
# module -> distribution. The frameworks are not here: the check finds those the machine has.
CHECK_IMPORTS = {"snakemake": "snakemake", "jsonschema": "jsonschema", "yaml": "pyyaml", "numpy": "numpy",
                 "pandas": "pandas", "pyarrow": "pyarrow", "psutil": "psutil", "pynvml": "nvidia-ml-py",
                 "sklearn": "scikit-learn"}
# The GPU machine, for the markers of Requires-Dist lines and the wheels' tags.
TARGET = {"python_version": "3.12", "python_full_version": "3.12.3", "implementation_name": "cpython",
          "platform_python_implementation": "CPython", "sys_platform": "linux", "platform_system": "Linux",
          "platform_machine": "x86_64", "os_name": "posix", "extra": ""}
GLIBC_MAX = 39  # manylinux_2_N wheels run on its glibc for N up to this
FILL = ("fill it as bench/gpu_device.sh's header says (pip download --python-version 3.12 --platform "
        "manylinux..._x86_64 -r bench/gpu_wheels.txt)")


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path: Path = PINS) -> tuple[dict[str, str], dict[str, str]]:
    """(name -> version of everything that travels, the `# built:` lines included; name -> why, of what does not)."""
    pins, left_out = {}, {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if m := re.match(r"#\s*not carried:\s*([A-Za-z0-9_.-]+)\s*(.*)", line):
            left_out[normal(m[1])] = m[2].strip() or "not needed by the check"
            continue
        line = re.sub(r"^#\s*built:\s*", "", line).split("#")[0].strip()
        if m := re.fullmatch(r"([A-Za-z0-9_.-]+)==([^\s;]+)", line):
            pins[normal(m[1])] = m[2]
    return pins, left_out


def read_lock(path: Path = LOCK) -> dict[str, str]:
    """name -> version of a pip-compile lock."""
    return {normal(m[1]): m[2] for m in re.finditer(r"^([A-Za-z0-9_.-]+)==([^\s\\]+)", path.read_text(), re.M)}


def read_machine(path: Path = MACHINE) -> dict[str, str | None]:
    """name -> version (None where the list gives none) of the GPU machine's packages."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[normal(name)] = version or None
    return out


def parse_wheel(filename: str) -> tuple[str, str, list[str], list[str], list[str]] | None:
    """(name, version, python tags, ABI tags, platform tags) of a wheel's file name; None if it is not one."""
    parts = filename.removesuffix(".whl").split("-")
    if not filename.endswith(".whl") or len(parts) not in (5, 6):
        return None
    name, version, python, abi, platform = parts[0], parts[1], *parts[-3:]
    return normal(name), version, python.split("."), abi.split("."), platform.split(".")


def tag_problem(pythons: list[str], abis: list[str], platforms: list[str]) -> str | None:
    """Why a wheel with these tags does not install on CPython 3.12, x86-64 Linux (None: it does)."""
    if platforms == ["any"]:
        return None if any(t in ("py3", "cp312") or re.fullmatch(r"py3(1[0-2]|[0-9])", t) for t in pythons) \
            else f"is for {'.'.join(pythons)}, not Python 3"
    linux = [p for p in platforms if re.fullmatch(r"manylinux(1|2010|2014|_2_(\d+))_x86_64", p)
             and int(re.fullmatch(r"manylinux(?:1|2010|2014|_2_(\d+))_x86_64", p)[1] or 5) <= GLIBC_MAX]
    if not linux:
        return f"is built for {'.'.join(platforms)}, not x86-64 manylinux"
    stable = "abi3" in abis and any(re.fullmatch(r"cp3(\d+)", t) and int(t[3:]) <= 12 for t in pythons)
    if "cp312" not in pythons and not stable:
        return f"is built for {'.'.join(pythons)}, not CPython 3.12 (cp312)"
    return None


def requirements(wheel: Path) -> list[str]:
    """The Requires-Dist lines of a wheel's METADATA."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next((n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)), None)
        text = zf.read(meta).decode() if meta else ""
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def travelling_bytes(wheels: Path, repo: Path = REPO) -> int:
    """What one call copies: the checkout's tracked and untracked-not-ignored files, and the wheel folder."""
    listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    files = {(repo / name).resolve() for name in listed if name}
    files |= {p.resolve() for p in wheels.rglob("*")} if wheels.is_dir() else set()
    return sum(p.stat().st_size for p in files if p.is_file())


def preflight(wheels: Path, pins_path: Path = PINS, lock_path: Path = LOCK, machine_path: Path = MACHINE,
              repo: Path = REPO) -> tuple[list[str], str]:
    """(one line per problem, each naming the folder; a line that sums up the folder)."""
    try:
        from packaging.requirements import Requirement
        from packaging.version import Version
    except ImportError:  # pip carries its own copy
        from pip._vendor.packaging.requirements import Requirement
        from pip._vendor.packaging.version import Version
    where = f"{wheels.relative_to(repo) if wheels.is_relative_to(repo) else wheels}/"
    files = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
    if not files:
        return [f"{where}: no wheels there; {FILL}"], ""
    pins, left_out = read_pins(pins_path)
    lock, machine = read_lock(lock_path), read_machine(machine_path)
    problems = []
    found: dict[str, list[tuple[str, Path]]] = {}
    for wheel in files:
        parsed = parse_wheel(wheel.name)
        if parsed is None:
            problems.append(f"{where}: {wheel.name} is not named as a wheel is (name-version-python-abi-platform)")
            continue
        name, version, *tags = parsed
        found.setdefault(name, []).append((version, wheel))
        if why := tag_problem(*tags):
            problems.append(f"{where}: {wheel.name} {why}: download it with --python-version 3.12 "
                            "--platform manylinux..._x86_64")
    for name, copies in sorted(found.items()):
        if len(copies) > 1:
            problems.append(f"{where}: {name} is there {len(copies)} times ({', '.join(w.name for _, w in copies)}): "
                            "keep the one bench/gpu_wheels.txt pins (two stop the install)")
        elif name not in pins:
            problems.append(f"{where}: {copies[0][1].name} is not in bench/gpu_wheels.txt: remove it")
        elif Version(copies[0][0]) != Version(pins[name]):
            problems.append(f"{where}: {copies[0][1].name} is {name} {copies[0][0]}, but bench/gpu_wheels.txt pins "
                            f"{pins[name]}")
    for name, version in sorted(pins.items()):
        if name not in found:
            problems.append(f"{where}: no wheel of {name}=={version} (bench/gpu_wheels.txt); {FILL}")
        if lock.get(name) != version:
            problems.append(f"{where}: bench/gpu_wheels.txt pins {name}=={version}, envs/base.lock "
                            + (f"has {lock[name]}: take the lock's" if name in lock else "has no such package"))
    # What the check needs, and what each travelling package asks for in turn (markers as on the GPU machine).
    carried = {name: copies[0] for name, copies in found.items() if len(copies) == 1}
    wanted = [(dist, "", f"the check (import {module})") for module, dist in CHECK_IMPORTS.items()]
    needed: set[str] = set()
    short: dict[str, list[str]] = {}  # name -> the asks it does not meet: on the machine at no or another version
    while wanted:
        name, spec, by = wanted.pop(0)
        if name in left_out:
            continue
        if name in carried:
            version = carried[name][0]
            if spec and not Requirement(f"{name}{spec}").specifier.contains(version, prereleases=True):
                problems.append(f"{where}: {by} needs {name}{spec}, but {carried[name][1].name} is {version}")
            if name not in needed:
                needed.add(name)
                for line in requirements(carried[name][1]):
                    req = Requirement(line)
                    if req.marker is None or req.marker.evaluate(TARGET):
                        wanted.append((normal(req.name), str(req.specifier), f"{name} {version}"))
        elif name in pins:  # pinned but not in the folder: reported above
            continue
        elif name in machine:
            have = machine[name]
            if spec and (have is None or not Requirement(f"{name}{spec}").specifier.contains(have, prereleases=True)):
                short.setdefault(name, []).append(f"{by} needs {name}{spec}")
        else:
            short.setdefault(name, []).append(f"{by} needs {name}{spec}")
    for name, asks in sorted(short.items()):
        have = ("is not on the GPU machine" if name not in machine
                else "may be too old on the GPU machine (bench/gpu_machine_packages.txt gives no version)"
                if machine[name] is None else f"is {machine[name]} on the GPU machine")
        problems.append(f"{where}: {name} {have}, and {'; '.join(asks)}: add it to bench/gpu_wheels.txt and the folder")
    for name in sorted(set(carried) - needed - set(left_out)):
        if name in pins:
            problems.append(f"{where}: {carried[name][1].name} travels, but nothing the check runs needs it: "
                            "drop it from bench/gpu_wheels.txt and the folder")
    size = travelling_bytes(wheels, repo)
    if size >= CARRY_LIMIT:
        problems.append(f"{where}: the checkout and the folder come to {size / 2**20:.1f} MiB, over the "
                        f"{CARRY_LIMIT / 2**20:.0f} MiB one call may copy")
    folder_mib = sum(w.stat().st_size for w in files) / 2**20
    return problems, (f"{where}: {len(files)} wheels, {folder_mib:.1f} MiB; with the checkout "
                      f"{size / 2**20:.1f} MiB of the {CARRY_LIMIT / 2**20:.0f} MiB one call may copy")


def unpack_list(wheels: Path) -> list[Path]:
    """The wheels whose package this Python lacks, or has at another version: the check runs with the versions
    that travel, whatever the machine's own are."""
    out = []
    for wheel in sorted(wheels.glob("*.whl")) if wheels.is_dir() else []:
        parsed = parse_wheel(wheel.name)
        try:
            have = metadata.version(parsed[0]) if parsed else None
        except metadata.PackageNotFoundError:
            have = None
        if parsed and have != parsed[1]:
            out.append(wheel)
    return out


def import_failures() -> list[str]:
    """'<module>: <the error's last line>' for each module of CHECK_IMPORTS this Python cannot import."""
    out = []
    for module in CHECK_IMPORTS:
        try:
            importlib.import_module(module)
        except Exception as exc:  # ImportError, or whatever a broken package raises while it loads
            out.append(f"{module}: {traceback.format_exception_only(exc)[-1].strip()}")
    return out


def main(argv: list[str]) -> int:
    command, *rest = argv or [""]
    if command == "preflight" and len(rest) == 1:
        problems, summary = preflight(Path(rest[0]).resolve())
        for line in problems:
            print(line, file=sys.stderr)
        if not problems:
            print(f"{summary}: ready")
        return 1 if problems else 0
    if command == "unpack" and len(rest) == 1:
        for wheel in unpack_list(Path(rest[0])):
            print(wheel)
        return 0
    if command == "imports" and not rest:
        failures = import_failures()
        for line in failures:
            print(line, file=sys.stderr)
        return 1 if failures else 0
    print("usage: python bench/gpu_wheels.py preflight DIR | unpack DIR | imports", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
