"""What produced a result: the package's version, and a digest of the code and data that compute results.

The results cache (service.http.admission) keys every result by its canonical request and by both of these, so
a database that outlives an upgrade never serves what older code computed: a new version, or any change to a
simulator source file or to the calibration data and fitted parameters, is a cache miss. The version is the one
written in results (`simulator.version`); the digest stays out of results, so equal code gives equal bytes.

The version is the installed package's (its metadata: pyproject.toml's `version` at install time); run from a
source tree that is not installed, pyproject.toml beside the packages gives it; failing both, "0+unknown". Both
are computed once per process (tens of milliseconds: about 1.3 MB of files read and hashed).
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Iterable
from functools import cache
from importlib import metadata
from pathlib import Path

__all__ = ["DISTRIBUTION", "DRAWING_CODE", "SIMULATOR_CODE", "code_digest", "digest_files", "drawing_digest",
           "package_version", "source_files",
           "source_tree_version"]

DISTRIBUTION = "clustersim"
UNKNOWN_VERSION = "0+unknown"

# What turns a canonical request into a result: the contract's models (defaults, validation), the cluster
# graph, the engine and cost models with their calibration data (simcore/calibration/reference/*.json) and
# fitted parameters (simcore/cost/fitted.py), and the service's adapters and search, which build the domain
# scenario from a request and write the result document.
SIMULATOR_CODE: tuple[str, ...] = ("api_schemas", "topology", "simcore", "service/convert.py",
                                   "service/convert_cluster.py", "service/search.py", "service/search_limits.py")
# What draws a picture from a result (the pictures' store keys a picture by its result and by this).
DRAWING_CODE: tuple[str, ...] = ("service/plots",)
# Files that change what the code computes; caches and compiled files do not.
SUFFIXES = (".py", ".json")


@cache
def package_version() -> str:
    """The installed clustersim's version; else pyproject.toml's beside the packages; else "0+unknown"."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return source_tree_version(Path(__file__).resolve().parents[1] / "pyproject.toml")


def source_tree_version(pyproject: Path) -> str:
    """The version in a clustersim pyproject.toml; "0+unknown" for a file that is missing, unreadable or another
    project's."""
    import tomllib  # only a source tree that is not installed needs it

    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return UNKNOWN_VERSION
    if project.get("name") != DISTRIBUTION or not isinstance(project.get("version"), str):
        return UNKNOWN_VERSION
    return str(project["version"])


def _root_of(top: str) -> Path:
    """The folder a top-level package is imported from (found, not imported: service does not import topology)."""
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the package {top} cannot be found: the results cache cannot be keyed without it")
    return Path(next(iter(spec.submodule_search_locations)))


def source_files(parts: Iterable[str]) -> list[tuple[str, Path]]:
    """(name, path) of every file with a suffix in SUFFIXES in the named packages, folders ("service/plots") and
    files ("service/convert.py"), outside __pycache__, sorted by name (the path from the package's parent)."""
    found: dict[str, Path] = {}
    for part in parts:
        top, _, rest = part.partition("/")
        root = _root_of(top)
        where = root / rest if rest else root
        paths = [where] if where.is_file() else [p for p in where.rglob("*") if p.is_file()]
        for path in paths:
            relative = path.relative_to(root)
            if path.suffix in SUFFIXES and "__pycache__" not in relative.parts:
                found[f"{top}/{relative.as_posix()}"] = path
        if not paths:
            raise RuntimeError(f"{part} holds no file: the results cache cannot be keyed without it")
    return sorted(found.items())


def digest_files(files: Iterable[tuple[str, Path]]) -> str:
    """SHA-256 over each file's name and bytes, in the order given: a change to any byte, a file added, removed
    or renamed, changes it."""
    sha = hashlib.sha256()
    for name, path in files:
        data = path.read_bytes()
        sha.update(f"{name}\0{len(data)}\0".encode())
        sha.update(data)
    return sha.hexdigest()


@cache
def code_digest() -> str:
    """The digest of the simulator's code and data (SIMULATOR_CODE), computed once per process."""
    return digest_files(source_files(SIMULATOR_CODE))


@cache
def drawing_digest() -> str:
    """The digest of the code that draws pictures (DRAWING_CODE), computed once per process."""
    return digest_files(source_files(DRAWING_CODE))
