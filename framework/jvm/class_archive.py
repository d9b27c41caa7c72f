"""Class data sharing for the JVMs logwheel starts again and again, loading the same classes
each time (the backfill's Spark driver, Kafka's nodes): the JDK's CDS. A JVM given an archive
(`-XX:SharedArchiveFile`) maps the classes in it instead of reading, parsing and verifying
each one again. Two ways to write one, by how long the writing JVM lives:

- A JVM this process ends (the Spark driver: PySpark's gateway exits when its stdin closes)
  writes the classes it loaded as it exits (`-XX:ArchiveClassesAtExit`). The driver's start
  took 3.1 s less CPU (`bench/backfill.py --records 4000`: the JVM's CPU 7.6 against 4.5 s,
  the session ready at 2.2 s instead of 3.8); writing costs that one backfill about 15 s.
- A JVM that outlives this process (a broker) lists the classes it loads as it goes
  (`-XX:DumpLoadedClassList`); once it is ready, the process that started it makes the
  archive from the list (`-Xshare:dump`, about 5 s, once). Ten fresh single-node starts took
  40.3 instead of 52.3 s (`tests/integration/test_broker_ready.py`).

An archive lives in `$LOGWHEEL_HOME/cds/` (Spark's about 170 MB, Kafka's 65), named for the
Java executable and what the caller says shapes the classes (versions, places, JVM options),
so an upgrade or another installation writes a new one; one unused for a week is removed when
another of its name is written. A truncated archive makes a JVM crash at start, so one is only
ever put in place whole: one process at a time (a lock) writes a part file, and only a part
that a JVM maps with its checksums verified is renamed into place. A JVM that finds an archive
of another build or classpath ignores it (`-Xshare:auto`, the default), with the JVM's CDS
messages off, so none reaches a command's output. Linux only (the writing JVM's classpath is
read from /proc); elsewhere nothing changes.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import logging
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO

from framework.jvm.jars import home
from framework.private_files import private_dir

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
"""The JVM's CDS messages (a class it cannot archive, an archive it cannot use) go to stdout
by default, among a command's output."""
EXIT_WAIT_S = 120.0
"""How long a process waits at its exit for its JVM to write the archive."""
STALE_DAYS = 7

log = logging.getLogger(__name__)


class ClassArchive:
    """The archive of one kind of JVM: the options that map or write it, and, in the process
    whose JVM writes it, putting it in place (`keep_at_exit`, `build`)."""

    def __init__(self, java: str, name: str, *shape: str, directory: Path | None = None) -> None:
        """`java`: the executable the JVMs run (its upgrade makes another archive)."""
        java = os.path.realpath(java)
        identity = [java, *(str(s) for s in _stat(java))]
        digest = hashlib.sha256("\0".join([*identity, *shape]).encode()).hexdigest()[:16]
        self.directory = directory or home() / "cds"
        self.path = self.directory / f"{name}-{digest}.jsa"
        self.part = self.path.with_suffix(".jsa.part")
        self._lock: IO | None = None

    def options(self) -> str:
        """Options of a JVM this process ends (`keep_at_exit`): map the archive if there is
        one; else write it as the JVM exits if no other process is writing it; else none."""
        return self._options(f"-XX:ArchiveClassesAtExit={self.part}")

    def listing_options(self) -> str:
        """Options of a JVM that outlives this process (a broker): map the archive if there is
        one; else list the classes it loads, if no other process is listing them, for
        `build`, which makes the archive from the list while that JVM runs on; else none."""
        return self._options(f"-XX:DumpLoadedClassList={self.classes}")

    def mapping_options(self) -> str:
        """Options of a JVM that only maps the archive, if there is one."""
        return self._options("")

    @property
    def classes(self) -> Path:
        return self.path.with_suffix(".classlist")

    def _options(self, writing: str) -> str:
        if self._lock is not None:  # this process has one JVM write it already
            return ""
        if not Path("/proc/self/cmdline").exists():
            return ""
        if self.path.exists():
            self.path.touch()  # in use: not stale (`_remove_stale`)
            return f"-XX:SharedArchiveFile={self.path} {QUIET}"
        if not writing:
            return ""
        private_dir(self.directory)
        lock = open(self.directory / f"{self.path.name}.lock", "w")  # noqa: SIM115
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            return ""
        self._lock = lock  # held until the archive is in place, or this process ends
        self.part.unlink(missing_ok=True)
        self.classes.unlink(missing_ok=True)
        self._remove_stale()
        log.info("writing a class archive for this JVM (once: later ones start sooner)")
        return f"{writing} {QUIET}"

    def build(self, java: str, classpath: str) -> None:
        """If this process had a JVM list its classes (`listing_options`): make the archive
        from the list as written so far (`-Xshare:dump`, seconds), and put it in place if
        it maps whole. `classpath` is the listing JVM's, exactly."""
        if self._lock is None or not self.classes.exists():
            return
        listed = self.classes.read_text(errors="replace")
        self.classes.unlink()  # the JVM listing goes on writing to a file no one reads
        listing = self.classes.with_suffix(".classlist.done")
        listing.write_text(listed[: listed.rfind("\n") + 1])  # without a line half-written
        dump = [java, "-Xshare:dump", f"-XX:SharedClassListFile={listing}",
                f"-XX:SharedArchiveFile={self.part}", *QUIET.split(), "-cp", classpath]  # fmt: skip
        try:
            self._keep_part(_runs(dump, timeout=300), java, classpath)
        except subprocess.TimeoutExpired:
            log.warning("making the class archive took over 300 s: left out")
            self.part.unlink(missing_ok=True)
        finally:
            listing.unlink(missing_ok=True)
            self._lock.close()
            self._lock = None

    def _keep_part(self, written: bool, java: str, classpath: str) -> None:
        """Put the part in place if it was written and a JVM maps it whole, every region's
        checksum verified; else remove it."""
        check = [java, f"-XX:SharedArchiveFile={self.part}", "-Xshare:on",
                 "-XX:+VerifySharedSpaces", "-cp", classpath, "-version"]  # fmt: skip
        if written and self.part.exists() and _runs(check, timeout=60):
            self.part.replace(self.path)
        else:
            self.part.unlink(missing_ok=True)

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
        self._keep_part(code == 0, java, classpath)


def _runs(command: list[str], timeout: float) -> bool:
    """Whether a JVM command exits 0. It runs in a scratch directory, where a crash's report
    goes (a JVM given an archive that does not map whole crashes), removed after."""
    java, *args = command
    with tempfile.TemporaryDirectory() as scratch:
        crash = [f"-XX:ErrorFile={scratch}/hs_err.log", "-XX:-CreateCoredumpOnCrash"]
        done = subprocess.run([java, *crash, *args], cwd=scratch, capture_output=True,
                              timeout=timeout, check=False)  # fmt: skip
    return done.returncode == 0


def _stat(path: str) -> tuple[int, int]:
    try:
        info = os.stat(path)
    except OSError:
        return (0, 0)
    return (info.st_size, info.st_mtime_ns)
