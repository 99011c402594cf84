"""Files at the edges: reading text, YAML and JSON with errors that name the file, and writing
outputs safely.

Reading: ``read_text`` refuses folders, devices, binary and non-UTF-8 files; ``load_structured``
(``structured.py``) parses YAML/JSON, naming the line and column of a parse error, an empty file as
empty, and refusing keys given twice and nesting deeper than ``MAX_DEPTH``; ``read_mapping`` and
``read_yaml_mapping`` both, and a mapping of fields at the top level. Every failure is one
``SpecsimError`` line naming the file.

Writing: ``Outputs`` writes a command's files as a set. Each file goes into a temporary folder
beside its target; only when every file is written are they renamed into place, and on any failure
the temporary folders are removed, leaving nothing behind. A target may only replace a regular file:
never a symlink (not followed, not replaced), a device node, a folder or anything else.
``output_folder`` does the same for a folder of outputs (``specsim report``), which may only replace
an earlier folder of ours (marked with ``REPORT_MARKER``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from specsim.errors import SpecsimError
from specsim.structured import MAX_DEPTH as MAX_DEPTH  # re-exported: readers import them from here
from specsim.structured import expect_mapping
from specsim.structured import load_structured as load_structured

T = TypeVar("T")

MAX_BYTES = 256 * 2**20  # a text input larger than this is refused rather than read into memory
REPORT_MARKER = ".specsim-report"
_STAGE = ".specsim-tmp-"


# --- reading ----------------------------------------------------------------------------------------

def read_text(path: str | Path, what: str = "") -> str:
    """The UTF-8 text of a regular file; SpecsimError (naming ``what`` or the file) for anything else."""
    p = Path(path)
    name = what or str(p)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise SpecsimError(f"{name}: no such file") from None
    except OSError as exc:
        raise SpecsimError(f"{name}: cannot read ({exc.strerror or type(exc).__name__})") from None
    if stat.S_ISDIR(st.st_mode):
        raise SpecsimError(f"{name}: is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise SpecsimError(f"{name}: not a regular file")
    if st.st_size > MAX_BYTES:
        raise SpecsimError(f"{name}: {st.st_size / 2**20:.0f} MiB is too large for an input file "
                           f"(at most {MAX_BYTES // 2**20} MiB)")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise SpecsimError(f"{name}: cannot read ({exc.strerror or type(exc).__name__})") from None
    if b"\x00" in data:
        raise SpecsimError(f"{name}: a binary file, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecsimError(f"{name}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None


def parsed_once(parse: Callable[[Path], T]) -> Callable[[Path], T]:
    """`parse` of a file, kept per process while the file is unchanged (keyed by path, mtime and size): for
    parsers whose result is frozen, so sharing it is safe (hardware profiles, model configs; a validation run
    loads the same 18 profiles 257 times). A file that cannot be stat()ed is parsed afresh, so that the
    parser's own reader names what is wrong with it."""
    from functools import lru_cache

    @lru_cache(maxsize=256)
    def cached(path: str, _mtime_ns: int, _size: int) -> T:
        return parse(Path(path))

    def load(path: Path) -> T:
        try:
            st = path.stat()
        except OSError:
            return parse(path)
        return cached(str(path), st.st_mtime_ns, st.st_size)

    return load


def is_file(path: str | Path) -> bool:
    """Path.is_file that answers False, not OSError, for a name the OS cannot look up (too long, ...)."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def read_structured(path: str | Path, what: str = "") -> Any:
    """A YAML or JSON file (JSON when it ends in .json), parsed; SpecsimError names the file (or
    ``what``), the line and column of a parse error, or says the file is empty."""
    p = Path(path)
    return load_structured(read_text(p, what), what or str(p), "json" if p.suffix.lower() == ".json" else "yaml")


def read_yaml_mapping(path: str | Path, what: str = "") -> tuple[dict[str, Any], str]:
    """(the mapping, the text) of a YAML or JSON file whose top level is a mapping of fields: one read
    for a reader that also wants the text (a scenario's line numbers). SpecsimError names the file (or
    ``what``): "FILE line L column C: <the parser's words>", "FILE: empty", "FILE: expected a mapping
    of fields (key: value lines), got a list"."""
    p = Path(path)
    where = what or str(p)
    text = read_text(p, what)
    data = load_structured(text, where, "json" if p.suffix.lower() == ".json" else "yaml")
    return expect_mapping(data, where), text


def read_mapping(path: str | Path, what: str = "") -> dict[str, Any]:
    """Parse a YAML or JSON file whose top level is a mapping (``read_yaml_mapping`` without the text)."""
    return read_yaml_mapping(path, what)[0]


def require(data: dict[str, Any], key: str, where: str, kind: type | tuple[type, ...] = (int, float)) -> Any:
    """data[key], checked present and of the given type; SpecsimError names file and field."""
    if key not in data or data[key] is None:
        raise SpecsimError(f"{where}: missing field '{key}'")
    value = data[key]
    if isinstance(value, bool) and kind in ((int, float), int, float):
        raise SpecsimError(f"{where}: field '{key}' must be a number, got {value!r}")
    if not isinstance(value, kind):
        raise SpecsimError(f"{where}: field '{key}' has the wrong type ({type(value).__name__}): {value!r}")
    return value


def positive(data: dict[str, Any], key: str, where: str) -> float:
    """A required finite number > 0."""
    value = float(require(data, key, where))
    if not 0 < value < float("inf"):
        raise SpecsimError(f"{where}: field '{key}' must be a finite number > 0, got {value}")
    return value


# --- writing ----------------------------------------------------------------------------------------

def _lstat(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SpecsimError(f"{path}: cannot inspect ({exc.strerror or type(exc).__name__})") from None


def check_target(target: str | Path, option: str = "--output") -> Path:
    """``target`` as a Path, or SpecsimError unless it may be written: its folder exists, and it is
    either absent or a regular file (never a symlink, device, folder or other special file)."""
    path = Path(target)
    where = f"{option} {path}"
    if not path.name or path.name in (".", ".."):
        raise SpecsimError(f"{where}: not a file name")
    st = _lstat(path)
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise SpecsimError(f"{where}: is a symbolic link; refusing to replace it (give the real path)")
        if stat.S_ISDIR(st.st_mode):
            raise SpecsimError(f"{where}: is a folder; give a file name")
        if not stat.S_ISREG(st.st_mode):
            raise SpecsimError(f"{where}: not a regular file (a device or special file); refusing to replace it")
    parent = path.parent
    pst = _lstat(parent) if str(parent) not in ("", ".") else _lstat(Path("."))
    if pst is None:
        raise SpecsimError(f"{where}: folder {parent} does not exist")
    if not stat.S_ISDIR(os.stat(parent).st_mode):
        raise SpecsimError(f"{where}: {parent} is not a folder")
    return path


def _make_stage(parent: Path, name: str, where: str) -> Path:
    try:
        stage = Path(tempfile.mkdtemp(prefix=f".{name}{_STAGE}", dir=parent))
    except OSError as exc:
        raise SpecsimError(f"{where}: cannot write in {parent} ({exc.strerror or type(exc).__name__})") from None
    return stage


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink()


class Outputs:
    """A command's output files, written as a set (module docstring).

    >>> with Outputs() as out:                     # doctest: +SKIP
    ...     df.to_csv(out.path(Path("sweep.csv")))  # written to a temporary folder beside sweep.csv
    ... # here every staged file has been renamed into place; on an exception, nothing was

    Files written beside a staged path (a sidecar ``NAME.json``) are part of the set too.
    """

    def __init__(self) -> None:
        self._stages: dict[Path, Path] = {}  # target folder -> temporary folder inside it
        self._where: dict[Path, tuple[str, str]] = {}  # target folder -> (option, "option target")

    def path(self, target: str | Path, option: str = "--output") -> Path:
        """Where to write ``target`` for now (checked writable now and again when committing)."""
        path = check_target(target, option)
        parent = path.parent
        key = Path(os.path.realpath(parent))
        if key not in self._stages:
            self._stages[key] = _make_stage(parent, path.name, f"{option} {path}")
            self._where[key] = (option, f"{option} {path}")
        return self._stages[key] / path.name

    def folder(self, target_folder: str | Path, option: str = "--output") -> Path:
        """A temporary folder whose files will land in ``target_folder`` (which must exist)."""
        folder = Path(target_folder)
        if not folder.is_dir() or folder.is_symlink():
            raise SpecsimError(f"{option} {folder}: not an existing folder")
        key = Path(os.path.realpath(folder))
        if key not in self._stages:
            self._stages[key] = _make_stage(folder, "outputs", f"{option} {folder}")
            self._where[key] = (option, f"{option} {folder}")
        return self._stages[key]

    def commit(self) -> list[Path]:
        """Rename every staged file into place; returns the final paths."""
        moves: list[tuple[Path, Path, str]] = []
        for folder, stage in self._stages.items():
            option, where = self._where[folder]
            for entry in sorted(stage.iterdir()):
                if entry.is_dir():
                    raise SpecsimError(f"{where}: cannot write a folder ({entry.name}) as an output file")
                dest = folder / entry.name
                check_target(dest, option)
                moves.append((entry, dest, where))
        done = []
        for src, dest, where in moves:
            try:
                os.replace(src, dest)
            except OSError as exc:
                raise SpecsimError(f"{where}: cannot write {dest} ({exc.strerror or type(exc).__name__})") from None
            done.append(dest)
        self.discard()
        return done

    def discard(self) -> None:
        """Remove the temporary folders and whatever is in them."""
        for stage in self._stages.values():
            _remove(stage)
        self._stages.clear()

    def __enter__(self) -> Outputs:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc_type is None:
            try:
                self.commit()
            finally:
                self.discard()
            return
        self.discard()
        if isinstance(exc, OSError) and not isinstance(exc, SpecsimError):
            where = next(iter(self._where.values()), ("", "output"))[1]
            raise SpecsimError(f"{where}: cannot write ({exc.strerror or exc})") from None


def write_outputs(files: Iterable[tuple[str | Path, str | bytes]], option: str = "--output") -> list[Path]:
    """Write (path, text or bytes) pairs as one set (``Outputs``); returns the paths written."""
    items = list(files)
    with Outputs() as out:
        for target, content in items:
            staged = out.path(target, option)
            if isinstance(content, bytes):
                staged.write_bytes(content)
            else:
                staged.write_text(content, encoding="utf-8")
    return [Path(t) for t, _ in items]


# --- a folder of outputs (specsim report) ----------------------------------------------------------------

def _is_ours(folder: Path, managed: tuple[str, ...]) -> bool:
    """An empty folder, one marked with REPORT_MARKER, or an unmarked report from before the marker."""
    names = {p.name for p in folder.iterdir()}
    return not names or REPORT_MARKER in names or {"report.html", "report.md", "plan.json"} <= names


def check_folder_target(target: str | Path, managed: tuple[str, ...], option: str = "--output") -> Path:
    """``target`` as a Path, or SpecsimError unless a folder of outputs may be written there: absent
    (its parent exists) or an earlier folder of ours (``_is_ours``), never a symlink or a file."""
    path = Path(target)
    where = f"{option} {path}"
    if not path.name or path.name in (".", ".."):
        path = Path(os.path.abspath(path))
        where = f"{option} {target}"
    st = _lstat(path)
    if st is None:
        parent = path.parent
        if not parent.is_dir():
            raise SpecsimError(f"{where}: folder {parent} does not exist")
        return path
    here = Path(os.path.realpath(Path.cwd()))
    if Path(os.path.realpath(path)) in (here, *here.parents):
        raise SpecsimError(f"{where}: is the current folder (or holds it); give a subfolder, e.g. -o report")
    if stat.S_ISLNK(st.st_mode):
        raise SpecsimError(f"{where}: is a symbolic link; refusing to replace it (give the real path)")
    if not stat.S_ISDIR(st.st_mode):
        raise SpecsimError(f"{where}: exists and is not a folder; refusing to replace it")
    try:
        ours = _is_ours(path, managed)
    except OSError as exc:
        raise SpecsimError(f"{where}: cannot read ({exc.strerror or type(exc).__name__})") from None
    if not ours:
        raise SpecsimError(f"{where}: a folder that is not an earlier specsim report (no {REPORT_MARKER}); "
                           "choose a new or empty folder")
    return path


def _carry(src: Path, dst: Path) -> None:
    """Hard-link (or copy) src into dst, a file or a whole tree."""
    if src.is_dir() and not src.is_symlink():
        shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy)
    else:
        _link_or_copy(str(src), str(dst))


def _link_or_copy(src: str, dst: str) -> str:
    if os.path.islink(src):
        os.symlink(os.readlink(src), dst)
        return dst
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst


@contextlib.contextmanager
def output_folder(target: str | Path, managed: tuple[str, ...], option: str = "--output") -> Iterator[Path]:
    """A temporary folder beside ``target`` to write a folder of outputs into; on success it replaces
    ``target`` in one rename (entries of an earlier folder that are not ``managed`` outputs, a user's
    notes, are carried over), marked with REPORT_MARKER. On failure it is removed and ``target`` is
    untouched."""
    path = check_folder_target(target, managed, option)
    where = f"{option} {target}"
    parent = path.parent
    stage = _make_stage(parent, path.name, where)
    try:
        umask = os.umask(0)
        os.umask(umask)
        stage.chmod(0o777 & ~umask)  # mkdtemp makes it private; the output folder should be as any other
        yield stage
        (stage / REPORT_MARKER).write_text("This folder was written by `specsim report`; rerunning it replaces "
                                           "the report's files here and keeps any others.\n")
        path = check_folder_target(target, managed, option)  # again: it may have changed meanwhile
        old: Path | None = None
        if path.exists():
            for entry in path.iterdir():
                if entry.name not in managed and entry.name != REPORT_MARKER:
                    _carry(entry, stage / entry.name)
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.specsim-old-", dir=parent))
            os.rename(path, old / path.name)
        try:
            os.rename(stage, path)
        except OSError:
            if old is not None:  # put the earlier folder back
                os.rename(old / path.name, path)
                _remove(old)
            raise
        if old is not None:
            _remove(old)
    except OSError as exc:
        _remove(stage)
        raise SpecsimError(f"{where}: cannot write ({exc.strerror or exc})") from None
    except BaseException:
        _remove(stage)
        raise
