"""Which BLAS a running process has loaded, read from its memory map (not assumed from how it was built).

Runs inside a framework's environment too (the adapters ask it of their own process): the standard library only.
"""

from __future__ import annotations

from pathlib import Path

# The BLAS libraries a process can have loaded, by their file name, and what each is called in the records.
BLAS_FILES = (("libmkl_rt", "mkl"), ("libmkl_core", "mkl"), ("libopenblas", "openblas"), ("libblis", "blis"),
              ("libcblas", "cblas"))


def blas_in_effect(pid: int | str = "self") -> tuple[str | None, list[str]]:
    """The BLAS process `pid` has loaded: its name in the records (mkl before openblas where both are mapped: MKL
    is only loaded when asked for) and the paths of every BLAS library mapped."""
    try:
        with open(f"/proc/{pid}/maps") as fh:
            paths = sorted({line.split()[-1] for line in fh if "/" in line and ".so" in line})
    except OSError:
        return None, []
    found = [(name, path) for path in paths for prefix, name in BLAS_FILES if Path(path).name.startswith(prefix)]
    names = {name for name, _ in found}
    return (next((n for n in ("mkl", "openblas", "blis", "cblas") if n in names), None),
            sorted({path for _, path in found}))
