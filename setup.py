"""Builds the Cython hot paths in ext/ into kafkapy.<package>._fast modules.

ext/<package>/<module>.pyx becomes the extension kafkapy.<package>.<module>. Each one has a
pure-Python twin in kafkapy/<package>/ that KAFKAPY_NO_EXTENSIONS=1 selects.
"""

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


setup(
    ext_modules=cythonize(
        _extensions(),
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True},
    ),
)
