"""Compiles the modules of PySpark's ``pyspark.zip`` into it, as pip compiled the same modules in
site-packages.

Spark starts each Python worker with ``$SPARK_HOME/python/lib/pyspark.zip`` first on its PYTHONPATH, and
Python never writes bytecode into a zip: every worker compiled pyspark from source, about 0.85 CPU seconds
where the same imports from compiled modules take 0.3. A Python data source's workers (the planner, the
streaming source and sink runners: ``raftlog_spark``'s) are started fresh and must connect back within
Spark's fixed 10 s; on a loaded machine the compiling was most of that.

Each ``.py`` member gets a ``.pyc`` beside it (zipimport looks there), unchecked-hash based: the zip is
rewritten only by pip's reinstall, which replaces it whole. Run with the interpreter Spark's workers run
(the bytecode is that Python's); a zip that already holds bytecode is left as it is.

    python scripts/spark_zip_bytecode.py [ZIP]    (default: the installed pyspark's)
"""

from __future__ import annotations

import importlib.util
import os
import py_compile
import sys
import tempfile
import warnings
import zipfile

UNCHECKED = py_compile.PycInvalidationMode.UNCHECKED_HASH  # the zip changes only when pip replaces it whole


def installed_zip() -> str:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SystemExit("spark_zip_bytecode: pyspark is not installed in this interpreter")
    return os.path.join(os.path.dirname(spec.origin), "python", "lib", "pyspark.zip")


def compiled(path: str) -> bool:
    with zipfile.ZipFile(path) as archive:
        return any(name.endswith(".pyc") for name in archive.namelist())


def compile_into(path: str) -> int:
    """Writes the zip again beside itself with a ``.pyc`` per ``.py`` and renames it into place; the
    number of modules compiled."""
    partial = path + ".partial"
    count = 0
    with (
        zipfile.ZipFile(path) as source,
        zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as out,
        tempfile.TemporaryDirectory() as scratch,
    ):
        module, bytecode = os.path.join(scratch, "module.py"), os.path.join(scratch, "module.pyc")
        for info in source.infolist():
            data = source.read(info)
            out.writestr(info, data)
            if not info.filename.endswith(".py") or "/tests/" in info.filename:  # pyspark's tests: not run
                continue
            with open(module, "wb") as f:
                f.write(data)
            with warnings.catch_warnings():  # pyspark's, shown when the module is compiled, not ours to see
                warnings.simplefilter("ignore", SyntaxWarning)
                py_compile.compile(module, bytecode, os.path.join(path, info.filename), doraise=True,
                                   invalidation_mode=UNCHECKED)  # fmt: skip
            pyc = zipfile.ZipInfo(info.filename + "c", info.date_time)
            pyc.compress_type = zipfile.ZIP_DEFLATED
            with open(bytecode, "rb") as f:
                out.writestr(pyc, f.read())
            count += 1
    os.replace(partial, path)
    return count


def main(argv: list[str]) -> int:
    path = argv[0] if argv else installed_zip()
    if compiled(path):
        return 0
    count = compile_into(path)
    print(f"spark_zip_bytecode: compiled {count} modules into {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
