"""The class archive is written by one JVM at a time, put in place only whole, and mapped by the
JVMs after it (a real JVM: what is under test is the JDK's CDS)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from framework.jvm import class_archive
from framework.jvm.class_archive import ClassArchive

pytestmark = pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK (javac, jar)")
JAVA = shutil.which("java") or "java"

WAIT = "public class Wait { public static void main(String[] a) throws Exception {\n"
WAIT += "  java.util.List<Object> l = new java.util.concurrent.CopyOnWriteArrayList<>();\n"
WAIT += "  while (System.in.read() != -1) {} } }\n"


@pytest.fixture()
def classes(tmp_path: Path) -> Path:
    """A jar (CDS archives no class from a directory) whose JVM runs until its stdin closes,
    as PySpark's gateway does."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "Wait.java").write_text(WAIT)
    subprocess.run(["javac", "-d", str(source), str(source / "Wait.java")], check=True)
    subprocess.run(["jar", "cf", str(tmp_path / "wait.jar"), "-C", str(source), "Wait.class"],
                   check=True)  # fmt: skip
    return tmp_path / "wait.jar"


def _start(options: str, classes: Path) -> subprocess.Popen:
    jvm = subprocess.Popen(["java", *options.split(), "-cp", str(classes), "Wait"],
                           stdin=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + 30
    while b"Wait" not in Path(f"/proc/{jvm.pid}/cmdline").read_bytes():  # running, as a gateway
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return jvm


def _loads_wait_from(archive: Path, classes: Path) -> str:
    """Where a JVM given only `archive` (`-Xshare:on`: it must map) loads the class Wait from."""
    command = ["java", f"-XX:SharedArchiveFile={archive}", "-Xshare:on", "-cp", str(classes),
               "-Xlog:class+load=info", "Wait"]  # fmt: skip
    out = subprocess.run(command, input=b"", capture_output=True, check=True).stdout.decode()
    return next(line for line in out.splitlines() if " Wait source: " in line).split(": ")[-1]


def _finish(archive: ClassArchive, jvm: subprocess.Popen, monkeypatch) -> None:
    """`keep_at_exit`, with the exit brought forward."""
    at_exit = []
    monkeypatch.setattr(class_archive.atexit, "register", lambda *a: at_exit.append(a))
    archive.keep_at_exit(jvm)
    assert len(at_exit) == 1
    func, *args = at_exit[0]
    func(*args)


def test_the_first_jvm_writes_the_archive_and_the_next_maps_it(classes, tmp_path, monkeypatch):
    home = tmp_path / "cds"
    writer = ClassArchive(JAVA, "wait", "1", directory=home)
    options = writer.options()
    assert "-XX:ArchiveClassesAtExit=" in options
    assert writer.options() == "", "one JVM writes it"
    # another process meanwhile (a second lock in this one conflicts the same way): no option
    assert ClassArchive(JAVA, "wait", "1", directory=home).options() == ""
    jvm = _start(options, classes)
    _finish(writer, jvm, monkeypatch)
    assert writer.path.exists() and not writer.part.exists()

    reader = ClassArchive(JAVA, "wait", "1", directory=home)
    assert reader.options().startswith(f"-XX:SharedArchiveFile={writer.path} ")
    assert _loads_wait_from(writer.path, classes) == "shared objects file (top)"
    # an archive of another classpath is ignored, and silently: the JVM's output is a command's
    other = shutil.copy(classes, tmp_path / "other.jar")
    ignored = subprocess.run(["java", *reader.options().split(), "-cp", other, "Wait"],
                             input=b"", capture_output=True, check=True)  # fmt: skip
    assert ignored.stdout == b""
    assert ClassArchive(JAVA, "wait", "2", directory=home).path != writer.path  # another shape


def test_an_archive_that_does_not_map_whole_is_never_put_in_place(classes, tmp_path, monkeypatch):
    """A truncated archive makes every JVM given it crash at start; the check's crash leaves
    no report behind in the working directory."""
    monkeypatch.chdir(tmp_path)
    writer = ClassArchive(JAVA, "wait", "1", directory=tmp_path / "cds")
    jvm = _start(writer.options(), classes)
    real_wait = jvm.wait

    def wait_then_truncate(timeout=None):
        code = real_wait(timeout)
        data = writer.part.read_bytes()
        writer.part.chmod(0o600)
        writer.part.write_bytes(data[: len(data) // 2])
        return code

    jvm.wait = wait_then_truncate
    _finish(writer, jvm, monkeypatch)
    assert not writer.path.exists() and not writer.part.exists()
    assert not list(tmp_path.glob("hs_err*"))


def test_writing_an_archive_removes_those_of_its_name_unused_for_a_week(tmp_path):
    home = tmp_path / "cds"
    home.mkdir()
    old, recent, other = home / "wait-0old.jsa", home / "wait-1recent.jsa", home / "x-2old.jsa"
    for path in (old, recent, other):
        path.write_bytes(b"")
    week_ago = time.time() - class_archive.STALE_DAYS * 86_400 - 60
    for path in (old, other):
        os.utime(path, (week_ago, week_ago))
    ClassArchive(JAVA, "wait", "1", directory=home).options()
    assert not old.exists() and recent.exists() and other.exists()


def test_a_jvm_that_outlives_its_starter_lists_its_classes_and_the_archive_is_made_meanwhile(
    classes, tmp_path
):
    """A broker's case: the list is read while the JVM runs on (and goes on writing it)."""
    home = tmp_path / "cds"
    writer = ClassArchive(JAVA, "wait", "1", directory=home)
    options = writer.listing_options()
    assert "-XX:DumpLoadedClassList=" in options and writer.listing_options() == ""
    jvm = _start(options, classes)
    deadline = time.monotonic() + 30
    while b"Wait" not in (writer.classes.read_bytes() if writer.classes.exists() else b""):
        assert time.monotonic() < deadline, "the JVM lists the classes it loads as it goes"
        time.sleep(0.05)
    try:
        writer.build(JAVA, str(classes))
    finally:
        jvm.stdin.close()
        jvm.wait(30)
    assert writer.path.exists() and not list(home.glob("*.part")) and not writer.classes.exists()
    reader = ClassArchive(JAVA, "wait", "1", directory=home)
    assert reader.listing_options().startswith(f"-XX:SharedArchiveFile={writer.path} ")
    assert reader.mapping_options() == reader.listing_options()
    assert _loads_wait_from(writer.path, classes) == "shared objects file"
