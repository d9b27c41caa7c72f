"""A Maven project's build (its jar and the dependencies Maven copied beside it) kept in the
user's cache under the hash of the project's files: a fresh clone of the same sources (`make
test`'s, the next developer's) links it instead of running Maven again, 8 s alone and 28-32 s
for the two oracle tests waiting on one build in a loaded `make test`. A changed file is
another hash, built once."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from framework.jvm.jars import home


def cached(project: Path, jar: Path) -> Path:
    """Where a build of `project` writing `jar` is kept: named for the jar and the hash of
    every file of the project (paths and contents)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in project.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(project)).encode() + b"\0" + path.read_bytes())
    return home() / "built" / f"{jar.stem}-{digest.hexdigest()[:16]}"


def restore(project: Path, jar: Path) -> bool:
    """Put a kept build of `project` in `jar`'s place (the jar, `dependency/` beside it);
    whether there was one."""
    kept = cached(project, jar)
    if not (kept / jar.name).exists():
        return False
    shutil.rmtree(jar.parent / "dependency", ignore_errors=True)
    (jar.parent / "dependency").mkdir(parents=True)
    for source in [kept / jar.name, *(kept / "dependency").glob("*.jar")]:
        _link(source, jar.parent / source.relative_to(kept))
    return True


def keep(project: Path, jar: Path) -> None:
    """Keep the build just made in `jar`'s place, whole or not at all (a part directory
    renamed into place; another process's keeping of the same build wins)."""
    kept = cached(project, jar)
    if kept.exists():
        return
    kept.parent.mkdir(parents=True, exist_ok=True)
    part = Path(tempfile.mkdtemp(dir=kept.parent, prefix=f".{kept.name}."))
    try:
        (part / "dependency").mkdir()
        for source in [jar, *(jar.parent / "dependency").glob("*.jar")]:
            _link(source, part / source.relative_to(jar.parent))
        part.rename(kept)
    except OSError:
        shutil.rmtree(part, ignore_errors=True)


def _link(source: Path, target: Path) -> None:
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:  # another file system
        shutil.copy2(source, target)
