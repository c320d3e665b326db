"""Builds the Cython hot paths in ext/ into kafkapy.<package>._fast modules.

ext/<package>/<module>.pyx becomes the extension kafkapy.<package>.<module>. Each one has a
pure-Python twin in kafkapy/<package>/ that KAFKAPY_NO_EXTENSIONS=1 selects.
"""

import os
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent


def _extensions() -> list[Extension]:
    exts = []
    for pyx in sorted((HERE / "ext").glob("*/*.pyx")):
        rel = pyx.relative_to(HERE)
        name = f"kafkapy.{pyx.parent.name}.{pyx.stem}"
        exts.append(Extension(name, [str(rel)], extra_compile_args=["-O3"]))
    return exts


# Each generated C file takes gcc -O3 a quarter of a minute or more: translate and compile them
# side by side, on every core (make install, pip wheel, the image build alike).
JOBS = max(1, min(len(_extensions()), os.cpu_count() or 1))

setup(
    ext_modules=cythonize(
        _extensions(),
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
        nthreads=JOBS,
    ),
    options={"build_ext": {"parallel": JOBS}},
)
