"""Class data sharing for a JVM that logwheel starts and that loads the same classes every time
(the backfill's Spark driver): the JDK's dynamic CDS archive. The first such JVM writes the
classes it loaded to an archive as it exits (`-XX:ArchiveClassesAtExit`); later ones map that
archive (`-XX:SharedArchiveFile`) instead of reading, parsing and verifying every class again.
A Spark driver's start took 3.1 s less CPU with it (`bench/backfill.py --records 4000`: the
JVM's CPU 7.6 against 4.5 s, the session ready at 2.2 s instead of 3.8).

The archive lives in `$LOGWHEEL_HOME/cds/` (about 170 MB for Spark), named for the Java
executable and what the caller says shapes the classes (Spark's version and place, the JVM's
options), so an upgrade or another installation writes a new one; one unused for a week is
removed when another of its name is written. Writing it costs the JVM that does so (about 20 s
more of a first backfill), once. A truncated archive makes the JVM crash at start, so an
archive is only ever put in place whole: one process at a time (a lock) dumps into a part
file, and once its JVM has exited cleanly and the part maps with its checksums verified, the
part is renamed into place. A JVM that finds an archive of another build or classpath ignores
it (`-Xshare:auto`, the default), with the JVM's CDS messages off so none reaches stdout.
Linux only (the dumping JVM's classpath is read from /proc); elsewhere nothing changes.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO

from framework.files import private_dir
from framework.jvm.jars import home

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
"""The JVM's CDS messages (a class it cannot archive, an archive it cannot use) go to stdout
by default, among a command's output."""
EXIT_WAIT_S = 120.0
"""How long a process waits at its exit for its JVM to write the archive."""
STALE_DAYS = 7

log = logging.getLogger(__name__)


class ClassArchive:
    """The archive of one kind of JVM: the options that use or write it, and, for the process
    that writes it, putting it in place once that JVM has exited."""

    def __init__(self, name: str, *shape: str, directory: Path | None = None) -> None:
        java = _java()
        identity = [java, *(str(s) for s in _stat(java))] if java else ["no java"]
        digest = hashlib.sha256("\0".join([*identity, *shape]).encode()).hexdigest()[:16]
        self.directory = directory or home() / "cds"
        self.path = self.directory / f"{name}-{digest}.jsa"
        self.part = self.path.with_suffix(".jsa.part")
        self._lock: IO | None = None

    def options(self) -> str:
        """JVM options: map the archive if there is one; else write it at exit if no other
        process is writing it; else none."""
        if self._lock is not None:
            return f"-XX:ArchiveClassesAtExit={self.part} {QUIET}"
        if not Path("/proc/self/cmdline").exists():
            return ""
        if self.path.exists():
            self.path.touch()  # in use: not stale (`_remove_stale`)
            return f"-XX:SharedArchiveFile={self.path} {QUIET}"
        private_dir(self.directory)
        lock = open(self.directory / f"{self.path.name}.lock", "w")  # noqa: SIM115
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            return ""
        self._lock = lock  # held until this process ends
        self.part.unlink(missing_ok=True)
        self._remove_stale()
        log.info("this JVM writes its class archive as it exits (once: later ones start sooner)")
        return f"-XX:ArchiveClassesAtExit={self.part} {QUIET}"

    def _remove_stale(self) -> None:
        """Archives of the same name unused for STALE_DAYS: of a Java, Spark or checkout (each
        has its own classpath) that is likely gone."""
        prefix = self.path.name.rsplit("-", 1)[0]
        cutoff = time.time() - STALE_DAYS * 86_400
        for old in self.directory.glob(f"{prefix}-*.jsa"):
            with contextlib.suppress(OSError):
                if old != self.path and old.stat().st_mtime < cutoff:
                    old.unlink()

    def keep_at_exit(self, jvm: subprocess.Popen) -> None:
        """If this process writes the archive: at its exit, end `jvm` (the JVM started with
        `options()`, which exits when its stdin closes, as PySpark's gateway does) and put the
        archive in place. Its classpath is read now, while it runs, to check the archive."""
        if self._lock is None:
            return
        try:
            cmdline = Path(f"/proc/{jvm.pid}/cmdline").read_bytes().split(b"\0")
            java = os.readlink(f"/proc/{jvm.pid}/exe")
        except OSError:
            return
        args = [a.decode() for a in cmdline]
        at = next((i for i, a in enumerate(args) if a in ("-cp", "-classpath")), None)
        if at is not None and at + 1 < len(args):  # else not yet the JVM, or not ours
            atexit.register(self._finish, jvm, java, args[at + 1])

    def _finish(self, jvm: subprocess.Popen, java: str, classpath: str) -> None:
        if jvm.stdin is not None:
            jvm.stdin.close()
        try:
            code = jvm.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            log.warning("the JVM did not exit in %.0f s: no class archive written", EXIT_WAIT_S)
            return
        if code == 0 and self.part.exists() and _maps(java, classpath, self.part):
            self.part.replace(self.path)
        else:
            self.part.unlink(missing_ok=True)


def _maps(java: str, classpath: str, archive: Path) -> bool:
    """Whether a JVM maps `archive` whole, every region's checksum verified (one that does not
    crashes: its error report goes to a directory of its own, removed)."""
    check = [java, f"-XX:SharedArchiveFile={archive}", "-Xshare:on", "-XX:+VerifySharedSpaces"]
    with tempfile.TemporaryDirectory() as scratch:
        crash = [f"-XX:ErrorFile={scratch}/hs_err.log", "-XX:-CreateCoredumpOnCrash"]
        done = subprocess.run([*check, *crash, "-cp", classpath, "-version"], cwd=scratch,
                              capture_output=True, timeout=60, check=False)  # fmt: skip
    return done.returncode == 0


def _java() -> str | None:
    """The java executable spark-class and the broker's launcher would run."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    return os.path.realpath(java) if java else None


def _stat(path: str) -> tuple[int, int]:
    try:
        info = os.stat(path)
    except OSError:
        return (0, 0)
    return (info.st_size, info.st_mtime_ns)
