"""bnstudy: what do normalization layers do to a deep network? Measured, reproducibly.

Importing the package pins the CPU kernels before torch is imported (:func:`pin_kernels`), so
that a study's numbers are bitwise the same on every Intel x86-64 CPU with AVX2, not only on
the machine that ran it (MKL grants its AVX2 branch on Intel CPUs only; each table records the
branches in force: :func:`bnstudy.provenance.kernels`, ``docs/reproducibility.md``).
"""

import os
import platform

__version__ = "0.1.0"

# torch picks its vectorized kernels (ATen), MKL its GEMM code path and oneDNN its convolution
# code path from the CPU it runs on, and each path rounds differently: an AVX-512 machine trains
# to other numbers than an AVX2 one (seen: the same digits run differs in the 5th digit between
# ATen's AVX2 and scalar kernels, and again under MKL's COMPATIBLE path). Pinning all three to
# the AVX2 branch gives this machine's numbers unchanged (AVX2 is its native branch: tested
# bitwise) and the same numbers on newer Intel CPUs, at the cost of their AVX-512 speed-up. On
# other x86-64 CPUs MKL refuses its AVX2 branch and runs AUTO (seen on an AMD EPYC).
PINNED_KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2,STRICT",
                  "ONEDNN_MAX_CPU_ISA": "AVX2"}


def _has_avx2() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return any(line.startswith("flags") and " avx2" in line for line in f)
    except OSError:
        return False


def pin_kernels() -> bool:
    """Set :data:`PINNED_KERNELS` in the environment (overriding it) on an x86-64 CPU with
    AVX2, unless ``BNSTUDY_KERNELS=native``; effective only before torch is imported (a job
    imports bnstudy first). Returns whether it pinned."""
    if os.environ.get("BNSTUDY_KERNELS", "avx2") == "native":
        return False
    if platform.machine().lower() not in ("x86_64", "amd64") or not _has_avx2():
        return False
    os.environ.update(PINNED_KERNELS)
    return True


pin_kernels()
