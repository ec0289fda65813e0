"""Where tools touch the machine: the ExecutionEnvironment interface and its local implementation.

The REPL sandbox decides what *model-written code* may do; an ExecutionEnvironment decides where the
*harness's own* I/O happens — starting an implementation's adapter process, reading context files,
writing reports — so the same loop and conformance code run against a local directory today and a
container or remote host later (the extension points below). The local implementation never hands
a child process the caller's secrets: environment variables are filtered by an allowlist and by
patterns for API keys, tokens and passwords.
"""

from __future__ import annotations

import abc
import dataclasses
import fnmatch
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from .errors import RLMError

__all__ = [
    "DEFAULT_ALLOWED_ENV",
    "DEFAULT_BLOCKED_ENV_PATTERNS",
    "CommandResult",
    "EnvironmentAccessError",
    "ExecutionEnvironment",
    "LocalExecutionEnvironment",
    "filter_env_vars",
]

DEFAULT_ALLOWED_ENV: tuple[str, ...] = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "TMPDIR",
    "TZ",
)
DEFAULT_BLOCKED_ENV_PATTERNS: tuple[str, ...] = (
    "*KEY*",
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*CREDENTIAL*",
    "*AUTH*",
    "*SESSION*",
    "*COOKIE*",
    "*PRIVATE*",
)


class EnvironmentAccessError(RLMError):
    """An ExecutionEnvironment refused or failed an operation (path outside it, missing file...)."""


@dataclasses.dataclass(frozen=True)
class CommandResult:
    """What a command did: exit code, captured output, duration, and whether it was stopped."""

    command: str
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        """Exit code 0 and not timed out."""
        return self.exit_code == 0 and not self.timed_out


class ExecutionEnvironment(abc.ABC):
    """Where commands run and files live. Implementations: local; containers and remote hosts are
    extension points (DockerEnvironment, KubernetesEnvironment, WASMEnvironment, SSHEnvironment)."""

    @abc.abstractmethod
    def run_command(self, command: str, timeout: float | None = None) -> CommandResult:
        """Execute a shell command and return its result (never raises for a non-zero exit)."""

    @abc.abstractmethod
    def read_file(self, path: str) -> str:
        """A file's text (UTF-8)."""

    @abc.abstractmethod
    def write_file(self, path: str, content: str) -> None:
        """Write text to a file, creating parent directories."""

    @abc.abstractmethod
    def list_directory(self, path: str) -> list[str]:
        """Sorted entry names of a directory."""

    @abc.abstractmethod
    def file_exists(self, path: str) -> bool:
        """Whether a file or directory exists."""

    def start_process(
        self, argv: Sequence[str], *, pass_fds: Sequence[int] = (), cwd: str | None = None
    ) -> subprocess.Popen[bytes]:
        """Start a long-lived child (the REPL fork server, a worker) and return it unwaited.

        Not abstract, so environments written before workers existed keep working; they just
        cannot host workers. The child gets no stdin/stdout/stderr (it talks over the inherited
        ``pass_fds``) and runs in its own session, so killing its process group stops it all.
        """
        raise EnvironmentAccessError(f"this environment ({type(self).__name__}) cannot start processes")


def filter_env_vars(
    source: Mapping[str, str],
    *,
    allowed: Iterable[str] = DEFAULT_ALLOWED_ENV,
    extra_allowed: Iterable[str] = (),
    blocked_patterns: Iterable[str] = DEFAULT_BLOCKED_ENV_PATTERNS,
) -> dict[str, str]:
    """The variables of ``source`` a child process may see.

    Allowed names pass unless a blocked pattern matches them (case-insensitive), so an explicit
    allowlist entry never smuggles ``OPENAI_API_KEY`` through; ``extra_allowed`` may contain globs.
    """
    allow = [a.upper() for a in (*allowed, *extra_allowed)]
    block = [b.upper() for b in blocked_patterns]
    kept = {}
    for name, value in source.items():
        upper = name.upper()
        if any(fnmatch.fnmatchcase(upper, b) for b in block):
            continue
        if any(fnmatch.fnmatchcase(upper, a) for a in allow):
            kept[name] = value
    return kept


class LocalExecutionEnvironment(ExecutionEnvironment):
    """Commands in a local shell, files under ``working_directory`` (paths may not leave it)."""

    def __init__(
        self,
        working_directory: str | os.PathLike[str] = ".",
        env_vars: Mapping[str, str] | None = None,
        shell: str = "/bin/bash",
        *,
        extra_allowed_env: Iterable[str] = (),
        blocked_env_patterns: Iterable[str] = DEFAULT_BLOCKED_ENV_PATTERNS,
        default_timeout: float | None = 60.0,
    ) -> None:
        root = Path(working_directory).resolve()
        if not root.is_dir():
            raise EnvironmentAccessError(f"working directory {root} does not exist")
        self.working_directory = root
        self.shell = shell
        self.default_timeout = default_timeout
        self.env_vars = filter_env_vars(
            os.environ if env_vars is None else env_vars,
            extra_allowed=extra_allowed_env,
            blocked_patterns=blocked_env_patterns,
        )

    def __repr__(self) -> str:
        return (
            f"LocalExecutionEnvironment(working_directory={str(self.working_directory)!r}, "
            f"shell={self.shell!r}, env_vars={sorted(self.env_vars)})"
        )

    def _path(self, path: str) -> Path:
        candidate = (self.working_directory / path).resolve()
        if not candidate.is_relative_to(self.working_directory):
            raise EnvironmentAccessError(
                f"path {path!r} leaves the working directory {self.working_directory}"
            )
        return candidate

    def run_command(self, command: str, timeout: float | None = None) -> CommandResult:
        limit = self.default_timeout if timeout is None else timeout
        started = time.perf_counter()
        process = subprocess.Popen(
            [self.shell, "-c", command],
            cwd=self.working_directory,
            env=self.env_vars,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = process.communicate(timeout=limit)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            timed_out = True
        return CommandResult(command, process.returncode, out, err, time.perf_counter() - started, timed_out)

    def start_process(
        self, argv: Sequence[str], *, pass_fds: Sequence[int] = (), cwd: str | None = None
    ) -> subprocess.Popen[bytes]:
        directory = self.working_directory if cwd is None else self._path(cwd)
        try:
            return subprocess.Popen(
                list(argv),
                cwd=directory,
                env=self.env_vars,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=tuple(pass_fds),
                start_new_session=True,
            )
        except OSError as exc:
            raise EnvironmentAccessError(f"cannot start {argv[0]!r}: {exc}") from None

    def read_file(self, path: str) -> str:
        target = self._path(path)
        try:
            return target.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise EnvironmentAccessError(f"cannot read {path!r}: {exc}") from None

    def write_file(self, path: str, content: str) -> None:
        target = self._path(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
        except OSError as exc:
            raise EnvironmentAccessError(f"cannot write {path!r}: {exc}") from None

    def list_directory(self, path: str = ".") -> list[str]:
        target = self._path(path)
        try:
            return sorted(entry.name for entry in target.iterdir())
        except OSError as exc:
            raise EnvironmentAccessError(f"cannot list {path!r}: {exc}") from None

    def file_exists(self, path: str) -> bool:
        try:
            return self._path(path).exists()
        except EnvironmentAccessError:
            return False
