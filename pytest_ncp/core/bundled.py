"""The benchmark that ships with the package, by name: ``ncp-bench`` (NCP-Bench's specs) and ``ncp-gold`` (the
auditor's gold set).

The repository keeps them at its top level (``specs/``, ``calibration/``); the build installs those folders
inside the package as ``pytest_ncp/bench/specs`` and ``pytest_ncp/bench/calibration`` (pyproject's
``package-dir``), so an installed wheel finds them in any working directory. A source checkout (an editable
install) has no such folder inside the package: there the top-level folders are the bundled ones.
Standard library only: the option parsers call this in every run.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

BENCH = "ncp-bench"  # --ncp-specs=ncp-bench, ncp run --specs ncp-bench, ncp validate ncp-bench
GOLD = "ncp-gold"    # --ncp-canary-set / ncp calibrate --set: the default gold set
NAMES: dict[str, str] = {BENCH: "specs", GOLD: "calibration"}  # name -> its folder (in bench/ or the checkout)


class BundledDataMissing(LookupError):
    """The package was installed without its benchmark data (a build that skipped package data)."""


def bundled_folder(name: str) -> Path:
    """The folder a bundled name stands for; ``BundledDataMissing`` says where it was looked for."""
    folder = NAMES[name]
    installed = resources.files("pytest_ncp") / "bench" / folder
    if isinstance(installed, Path) and installed.is_dir():
        return installed
    checkout = _checkout_folder(name)
    if checkout is not None:
        return checkout
    raise BundledDataMissing(f"{name}: the bundled {folder}/ is not installed (looked in {installed} and "
                             f"{Path(__file__).resolve().parents[2] / folder}); reinstall pytest-ncp from a wheel "
                             "built with its package data")


def writable_folder(raw: str | Path) -> Path | None:
    """Where to write into ``raw``: a bundled name stands for the checkout's own top-level folder (the source a
    build installs; a copy installed inside the package is no place to write, so None there); any other path as
    given."""
    name = bundled_name(raw)
    if name is None:
        return Path(raw)
    checkout = _checkout_folder(name)
    path = Path(raw)
    return checkout.joinpath(*(path.parts[1:] if not path.is_absolute() else ())) if checkout is not None else None


def _checkout_folder(name: str) -> Path | None:
    """The top-level folder of a source checkout (an editable install) that a bundled name stands for; None when
    the package does not sit in one."""
    repository = Path(__file__).resolve().parents[2]  # pytest_ncp/core/bundled.py -> the checkout, if it is one
    checkout = repository / NAMES[name]
    return checkout if (repository / "pyproject.toml").is_file() and checkout.is_dir() else None


def bundled_name(raw: str | Path) -> str | None:
    """The bundled name ``raw`` starts with (``ncp-bench``, ``ncp-bench/caligari.yaml``), if any. A name stays a
    path when a file or folder of that name exists (a studio's own ``./ncp-bench`` wins); an ini's ``paths``
    value arrives as ``<inidir>/ncp-bench``."""
    path = Path(raw)
    if path.exists():
        return None
    if path.is_absolute():
        return path.name if path.name in NAMES else None
    return path.parts[0] if path.parts and path.parts[0] in NAMES else None


def resolve(raw: str | Path) -> Path:
    """``ncp-bench`` / ``ncp-gold`` (or a file inside them) -> the bundled folder (file); any other path as given."""
    name = bundled_name(raw)
    if name is None:
        return Path(raw)
    path = Path(raw)
    inside = path.parts[1:] if not path.is_absolute() else ()
    return bundled_folder(name).joinpath(*inside)
