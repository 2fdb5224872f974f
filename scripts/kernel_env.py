"""Print the environment of one leg of the kernel matrix (``make test``), as ``KEY=VALUE`` words.

``native``
    nothing: every library picks the kernels of the CPU it finds.
``generic``
    every library on its most generic kernels, the stand-in for a CPU with other vector units:
    torch's ATen without vectorisation (``ATEN_CPU_CAPABILITY=default``), OpenBLAS's oldest
    core of the architecture (``Prescott`` on x86-64, ``ARMV8`` on arm64), numpy's dispatched
    SIMD targets all off (``NPY_DISABLE_CPU_FEATURES``, the targets this numpy build dispatches
    to; its baseline stays), and on x86-64 MKL in its conditional-numerical-reproducibility
    mode for the oldest code path (``MKL_CBWR=COMPATIBLE``; torch's CPU build computes through
    MKL too).

It cannot make two CPUs compute the same bits (glibc's libm, oneDNN and the compilers' own
dispatch remain); it runs the suite on a second set of kernels so that a test or a stored output
that assumes bit-equality of two computations fails here before it fails on a reader's machine.

Usage: ``env $(python scripts/kernel_env.py generic) pytest ...``.
"""

from __future__ import annotations

import platform
import sys


def leg_env(leg: str) -> dict[str, str]:
    """The variables of ``leg`` (``native`` or ``generic``) on this machine."""
    if leg == "native":
        return {}
    if leg != "generic":
        raise SystemExit(f"unknown leg {leg!r}: use native or generic")
    from numpy._core._multiarray_umath import __cpu_dispatch__

    arm = platform.machine().lower() in ("arm64", "aarch64")
    env = {
        "ATEN_CPU_CAPABILITY": "default",
        "OPENBLAS_CORETYPE": "ARMV8" if arm else "Prescott",
    }
    if __cpu_dispatch__:
        env["NPY_DISABLE_CPU_FEATURES"] = ",".join(__cpu_dispatch__)
    if not arm:
        env["MKL_CBWR"] = "COMPATIBLE"
    return env


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    print(" ".join(f"{k}={v}" for k, v in leg_env(argv[0]).items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
