"""Model folders or files given as URIs (`s3://`, `gs://`, `hdfs://`, `file://`): fetched to a
local cache.

KenLM, SentencePiece and the fastText reader read local files only, and a Ray worker may run on a
machine that has none of the user's folders. So a model given as a URI is copied, on the worker
that needs it, into `$DATACLEAN_CACHE` (default `~/.cache/dataclean`)`/models/<key>/`, where the
key hashes the URI and every file's name, size and modification time: a changed model is fetched
again, an unchanged one once per machine. The copy is made in a temporary folder and renamed into
place, so workers that fetch at the same time never see half a model. Credentials for object
stores come from the usual settings of each filesystem (for S3: `AWS_ACCESS_KEY_ID`,
`AWS_ENDPOINT_URL`...).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
import tempfile
from pathlib import Path

import pyarrow.fs as pafs

from dataclean.errors import ConfigError
from dataclean.io.shards import filesystem


def is_uri(spec: str) -> bool:
    """Whether a model spec is a URI (`scheme://...`) rather than a name or a local path."""
    return "://" in spec


def cache_root() -> Path:
    """Where fetched models are kept on this machine."""
    return Path(os.environ.get("DATACLEAN_CACHE", Path.home() / ".cache" / "dataclean")) / "models"


def _listing(uri: str, single_file: bool = False) -> tuple[pafs.FileSystem, list[pafs.FileInfo]]:
    fs, path = filesystem(uri)
    info = fs.get_file_info(path)
    if single_file:
        if info.type != pafs.FileType.File:
            raise ConfigError(f"model {uri}: no such file")
        return fs, [info]
    if info.type != pafs.FileType.Directory:
        raise ConfigError(f"language model {uri}: not a folder")
    files = [i for i in fs.get_file_info(pafs.FileSelector(path)) if i.type == pafs.FileType.File]
    if not files:
        raise ConfigError(f"language model {uri}: the folder is empty")
    return fs, sorted(files, key=lambda i: i.path)


def check_remote_model(uri: str, single_file: bool = False) -> None:
    """A `ConfigError` unless `uri` is a folder of files, or with `single_file` a file (checked
    where the run starts)."""
    _listing(uri, single_file)


def fetch_file(uri: str) -> Path:
    """A local copy of the one-file model at `uri` (a fastText `.bin`), fetched as `fetch_model`
    fetches a folder."""
    return fetch_model(uri, single_file=True) / posixpath.basename(filesystem(uri)[1])


def fetch_model(uri: str, single_file: bool = False) -> Path:
    """A local copy of the model folder at `uri` (see the module docstring); with `single_file`,
    a local folder holding a copy of the file at `uri`."""
    fs, files = _listing(uri, single_file)
    key = hashlib.sha256(uri.encode())
    for info in files:
        mtime = info.mtime_ns if info.mtime_ns is not None else 0
        key.update(f"\0{posixpath.basename(info.path)}\0{info.size}\0{mtime}".encode())
    target = cache_root() / key.hexdigest()[:24]
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".fetch-", dir=target.parent))
    try:
        for info in files:
            with (
                fs.open_input_stream(info.path) as source,
                open(staging / posixpath.basename(info.path), "wb") as sink,
            ):
                shutil.copyfileobj(source, sink, 1 << 20)
        try:
            staging.rename(target)
        except OSError:
            if not target.is_dir():  # another worker's rename won the race otherwise
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
