"""The context of ``rlm-compat run``: files, directories, globs or standard input, as one string.

Files are read through an :class:`~rlm_compat.environments.ExecutionEnvironment`
(:class:`~rlm_compat.environments.LocalExecutionEnvironment` rooted at ``/`` by default), so the
same command reads a container's or a remote host's files once such an environment exists.

**Layout.** One file is its text, unchanged (what ``--context-file`` always gave). Several files —
a directory, a glob, ``-`` among others, or the flag repeated — become one string where each file
is preceded by a header line in the format ``head``/``tail`` print for several files::

    ==> logs/app.log <==
    <text of logs/app.log>

    ==> logs/db.log <==
    <text of logs/db.log>

A string, not a ``{path: text}`` dict, because every system prompt the model gets says
``context: str`` and reports ``len(context)`` as its size in characters, and the examples it is
shown (``context[:500]``, ``re.findall(..., context)``) only work on a string; with a dict the size
would be the number of files and the examples would fail. The headers keep the file names findable
(``re.split(r"^==> (.+) <==$", context, flags=re.M)``) in the layout models have seen most.

Directories are walked recursively in sorted order; names starting with ``.`` (``.git``, editor
files) are skipped, symbolic links to directories are not followed (as ``grep -r``: one may loop),
and binary files found inside a directory or glob are skipped (listed in
:attr:`ContextBundle.skipped`). A file named explicitly that is missing, unreadable, binary or
empty, a directory or glob with no text file, and empty standard input are
:class:`ContextInputError` naming the path.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

from ...environments import EnvironmentAccessError, ExecutionEnvironment, LocalExecutionEnvironment
from .tooling_errors import ToolUsageError

__all__ = ["STDIN", "ContextBundle", "ContextInputError", "load_context", "render_files"]

STDIN = "-"
"""The source name that reads standard input."""

_GLOB_CHARS = re.compile(r"[*?\[]")


class ContextInputError(ToolUsageError):
    """A context source cannot be used: missing, unreadable, binary, empty, or matching nothing."""


@dataclass(frozen=True)
class ContextBundle:
    """The context text and where it came from (``files``: display path and characters each)."""

    text: str
    files: tuple[tuple[str, int], ...]
    skipped: tuple[str, ...] = field(default=())

    def describe(self) -> dict[str, object]:
        """JSON-ready summary for ``--json`` output: file names and sizes, never the text."""
        return {
            "chars": len(self.text),
            "files": [{"path": path, "chars": chars} for path, chars in self.files],
            "skipped_binary": list(self.skipped),
        }


def load_context(
    sources: Sequence[str],
    *,
    environment: ExecutionEnvironment | None = None,
    stdin: BinaryIO | None = None,
    cwd: str | None = None,
) -> ContextBundle:
    """Read ``sources`` (paths, directories, globs, ``-``) into one context string (module doc)."""
    if not sources:
        raise ContextInputError("no context source given")
    env = environment if environment is not None else LocalExecutionEnvironment("/")
    base = os.getcwd() if cwd is None else cwd
    files: list[tuple[str, str]] = []
    skipped: list[str] = []
    several = len(sources) > 1
    for source in sources:
        if source == STDIN:
            files.append(("<stdin>", _read_stdin(stdin)))
            continue
        absolute = os.path.normpath(os.path.join(base, os.path.expanduser(source)))
        if _GLOB_CHARS.search(source):
            several = True
            matched = _glob(env, absolute)
            if not matched:
                raise ContextInputError(f"context glob {source!r} matches no file")
            files.extend(_read_many(env, matched, base, skipped, source))
        elif _is_directory(env, absolute):
            several = True
            found = [os.path.join(absolute, rel) for rel in _walk(env, absolute)]
            if not found:
                raise ContextInputError(f"context directory {source!r} holds no file")
            files.extend(_read_many(env, found, base, skipped, source))
        else:
            files.append((source, _read_one(env, absolute, source)))
    text = render_files(files) if several else files[0][1]
    return ContextBundle(text, tuple((path, len(body)) for path, body in files), tuple(skipped))


def render_files(files: Iterable[tuple[str, str]]) -> str:
    """Several files as one string: each preceded by ``==> path <==`` (the layout of the module doc)."""
    parts = []
    for path, text in files:
        body = text if text.endswith("\n") else text + "\n"
        parts.append(f"==> {path} <==\n{body}")
    return "\n".join(parts)


def _read_stdin(stream: BinaryIO | None) -> str:
    import sys

    source = stream if stream is not None else sys.stdin.buffer
    data = source.read()
    if not data.strip():
        raise ContextInputError("standard input (-) is empty; pipe the context in or name a file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ContextInputError(
            f"standard input (-) is not UTF-8 text (byte {exc.start}); convert it first"
        ) from None
    if "\x00" in text:
        raise ContextInputError("standard input (-) is binary (it contains NUL bytes)")
    return text


def _read_one(env: ExecutionEnvironment, path: str, shown: str) -> str:
    """An explicitly named file: every problem is an error."""
    if not env.file_exists(path):
        raise ContextInputError(f"cannot read context file {shown!r}: it does not exist")
    text = _read_text(env, path, shown)
    if text is None:
        raise ContextInputError(f"context file {shown!r} is binary, not UTF-8 text")
    if not text.strip():
        raise ContextInputError(f"context file {shown!r} is empty")
    return text


def _read_many(
    env: ExecutionEnvironment, paths: Sequence[str], base: str, skipped: list[str], source: str
) -> list[tuple[str, str]]:
    """Files found by a directory walk or a glob: binary ones are skipped, empty ones kept."""
    read = []
    for path in paths:
        shown = _display(path, base)
        text = _read_text(env, path, shown)
        if text is None:
            skipped.append(shown)
        else:
            read.append((shown, text))
    if not read:
        raise ContextInputError(f"context source {source!r} holds only binary files ({len(skipped)})")
    return read


def _read_text(env: ExecutionEnvironment, path: str, shown: str) -> str | None:
    """The file's text, or None when it is binary (not UTF-8, or holding NUL characters)."""
    try:
        text = env.read_file(path)
    except EnvironmentAccessError as exc:
        if isinstance(exc.__context__, UnicodeDecodeError):
            return None
        reason = str(exc.__context__ or exc)
        raise ContextInputError(f"cannot read context file {shown!r}: {reason}") from None
    return None if "\x00" in text else text


def _is_directory(env: ExecutionEnvironment, path: str) -> bool:
    """Whether ``path`` lists as a directory (the interface has no stat; listing is the test)."""
    if not env.file_exists(path):
        return False
    try:
        env.list_directory(path)
    except EnvironmentAccessError as exc:
        if isinstance(exc.__context__, NotADirectoryError):
            return False
        raise ContextInputError(f"cannot list context directory {path!r}: {exc.__context__ or exc}") from None
    return True


def _walk(env: ExecutionEnvironment, root: str, prefix: str = "") -> list[str]:
    """Every file under ``root`` as a relative path, sorted, hidden names skipped."""
    found: list[str] = []
    for name in env.list_directory(os.path.join(root, prefix) if prefix else root):
        if name.startswith("."):
            continue
        relative = f"{prefix}/{name}" if prefix else name
        path = os.path.join(root, relative)
        if _is_directory(env, path):
            if not _linked(env, path):  # as grep -r: a link may loop back to an ancestor
                found.extend(_walk(env, root, relative))
        else:
            found.append(relative)
    return found


def _linked(env: ExecutionEnvironment, path: str) -> bool:
    """Whether ``path`` is a symbolic link (known for the local environment only)."""
    return isinstance(env, LocalExecutionEnvironment) and os.path.islink(path)


def _glob(env: ExecutionEnvironment, pattern: str) -> list[str]:
    """Files matching an absolute glob (``*``, ``?``, ``[..]`` within a name; ``**`` any depth)."""
    parts = pattern.split("/")
    fixed = next(i for i, part in enumerate(parts) if _GLOB_CHARS.search(part))
    root = "/".join(parts[:fixed]) or "/"
    wanted = parts[fixed:]
    if not _is_directory(env, root):
        return []
    return [os.path.join(root, rel) for rel in _walk(env, root) if _match(rel.split("/"), wanted)]


def _match(names: list[str], pattern: list[str]) -> bool:
    if not pattern:
        return not names
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_match(names[i:], rest) for i in range(len(names) + 1))
    return bool(names) and fnmatch.fnmatchcase(names[0], head) and _match(names[1:], rest)


def _display(path: str, base: str) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    relative = os.path.relpath(path, base)
    return path if relative.startswith("..") else relative
