"""Theano configured by dlbench, then imported: the one module that imports Theano, after setting its flags.

Theano is configured here, not by the user's ~/.theanorc or THEANO_FLAGS: the flags
below are set before `import theano`. Its compile cache lives inside the environment
(sys.prefix), so that two environments never share one; Theano locks the cache while
it compiles, so points running at once wait for each other there instead of clashing.
The runner sets OMP_NUM_THREADS and OPENBLAS_NUM_THREADS to the point's threads before
this module is imported; the threads are OpenBLAS's (Theano's OpenMP is off, see
`theano_flags`). The other Theano modules of dlbench take Theano from here.

numpy's own OpenBLAS (inside numpy.libs) is an ILP64 build with suffixed symbols
(sgemm_64_) that Theano cannot call, so Theano's C code links the system OpenBLAS
(`-lopenblas`, Debian's libopenblas-dev).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from dlbench.paths import cache_root


def blas_ldflags() -> str:
    """-lopenblas; a conda environment's own OpenBLAS (in sys.prefix/lib) first, where it has one; MKL's
    single dynamic library (the environment's, PyPI's `mkl`) where the point asks for MKL (DLBENCH_BLAS).

    No commas (THEANO_FLAGS splits on them) and every token a flag (Theano refuses a bare path): the run
    path goes to the linker as -Xlinker -R<dir> (ld's -R with a folder is -rpath).
    """
    lib = Path(sys.prefix) / "lib"
    if os.environ.get("DLBENCH_BLAS") == "mkl":
        found = sorted(lib.glob("libmkl_rt.so*"))
        if found:  # PyPI's wheel has only the versioned file: link it by its name
            return f"-L{lib} -Xlinker -R{lib} -l:{found[-1].name}"
    if (lib / "libopenblas.so").exists():
        return f"-L{lib} -Xlinker -R{lib} -lopenblas"
    return "-lopenblas"


def _compile_base() -> str:
    """The folder Theano compiles into: inside the environment, else (read-only env) in the user's cache."""
    inside = Path(sys.prefix) / "theano-cache"
    try:
        inside.mkdir(exist_ok=True)
        if os.access(inside, os.W_OK):
            return str(inside)
    except OSError:
        pass
    digest = hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]
    return str(cache_root() / "theano-cache" / f"{Path(sys.prefix).name}-{digest}")


def requested_threads() -> int:
    try:
        return max(1, int(os.environ.get("OMP_NUM_THREADS") or 1))
    except ValueError:
        return 1


def theano_flags(compile_base: str) -> str:
    """The whole of Theano's configuration, as THEANO_FLAGS (comma-separated key=value)."""
    flags = {
        "device": "cpu",
        # float32, or float64 for `precision: fp64` (the registry sets DLBENCH_FLOATX before the import)
        "floatX": os.environ.get("DLBENCH_FLOATX", "float32"),
        "blas__ldflags": blas_ldflags(),
        # OpenMP stays off: theano-pymc 1.1.2's Elemwise emits a broken pragma with openmp=True
        # (`#pragma omp parallel for if(n>={int(config.openmp_elemwise_minsize)})`, not an f-string)
        # that g++ rejects; the threads come from OpenBLAS (OPENBLAS_NUM_THREADS), which runs the
        # convolutions (CorrMM: im2col + gemm) and the dense layers.
        "openmp": "False",
        "base_compiledir": compile_base,
        # Points running at once queue on the compile lock (a flock, freed if its holder dies); the
        # default 120 s of waiting can run out behind a few cold compilations.
        "compile__timeout": "3600",
    }
    bad = [v for v in flags.values() if "," in v or "=" in v]
    if bad:
        raise RuntimeError(f"THEANO_FLAGS cannot hold a value with ',' or '=' (a path?): {bad[0]}")
    return ",".join(f"{k}={v}" for k, v in flags.items())


THEANO_FLAGS = theano_flags(_compile_base())
os.environ["THEANO_FLAGS"] = THEANO_FLAGS  # overrides whatever the user's shell had
os.environ["THEANORC"] = os.path.join(sys.prefix, "dlbench-no-theanorc")  # a file that does not exist

import theano  # noqa: E402
import theano.tensor as T  # noqa: E402  (T: the tutorials' spelling)
from theano.sandbox.rng_mrg import MRG_RandomStream  # noqa: E402, F401  (for theano_network)
from theano.tensor.nnet import conv2d  # noqa: E402, F401  (for theano_network)
from theano.tensor.signal.pool import Pool, pool_2d  # noqa: E402, F401  (for theano_network)

FLOATX = theano.config.floatX


def floatx(value: float) -> np.ndarray:
    """A floatX number for a shared variable's value."""
    return np.asarray(value, dtype=FLOATX)


def constant(value: float):
    """A floatX constant in the graph, so that no float64 creeps in."""
    return T.constant(floatx(value))


def _find_library(name: str, dirs: list[str]) -> str | None:
    """Where the linker finds -l`name`: the -L folders first, then the compiler's own search path."""
    filename = name[1:] if name.startswith(":") else f"lib{name}.so"  # -l:libmkl_rt.so.3 names the file
    for d in dirs:
        candidate = Path(d) / filename
        if candidate.exists():
            return os.path.realpath(candidate)
    try:
        found = subprocess.run([theano.config.cxx or "g++", f"-print-file-name={filename}"], capture_output=True,
                               text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return os.path.realpath(found) if os.path.isabs(found) and os.path.exists(found) else None


@functools.cache
def blas_libraries() -> list[str]:
    """The shared libraries theano.config.blas__ldflags resolves to (what Theano's C code links)."""
    flags = theano.config.blas__ldflags.split()
    dirs = [f[2:] for f in flags if f.startswith("-L")]
    found = [_find_library(f[2:], dirs) for f in flags if f.startswith("-l")]
    return [f for f in found if f]


def openblas_threads(libraries: list[str]) -> int | None:
    """Threads of the OpenBLAS Theano links, asked of the library itself (the same one its modules load)."""
    for path in libraries:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        if hasattr(lib, "openblas_get_num_threads"):
            return int(lib.openblas_get_num_threads())
    return None


def check_toolchain() -> None:
    """Theano without g++ or without its BLAS falls back to slow Python code or fails op by op: stop at once."""
    if not theano.config.cxx:
        raise RuntimeError("Theano found no C++ compiler (g++ on PATH); install g++ (Debian: g++ python3-dev)")
    if not blas_libraries():
        raise RuntimeError(f"Theano's BLAS flags {theano.config.blas__ldflags!r} name no library the linker finds; "
                           "install OpenBLAS (Debian: libopenblas-dev)")
