"""Find the input shards: files, globs and folders on any filesystem pyarrow supports.

A shard's `name` is its path relative to the root the user gave (the folder, the glob's fixed
prefix, or the file's own folder): ids are derived from it, so moving a corpus to another disk or
bucket keeps its ids.
"""

from __future__ import annotations

import fnmatch
import posixpath
from dataclasses import dataclass

import pyarrow.fs as pafs

from dataclean.errors import InputError

FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".ndjson": "jsonl",
    ".txt": "text",
    ".text": "text",
}
COMPRESSIONS = (".gz", ".zst", ".bz2")


@dataclass(frozen=True)
class Shard:
    """One input file. `index` is its position in the sorted input list (names output files)."""

    uri: str
    name: str
    format: str
    size: int
    mtime: float
    index: int = 0

    @property
    def label(self) -> str:
        """How error messages name this shard."""
        return self.uri


def shard_format(path: str) -> str | None:
    """The reader for a path by its extension (compression suffixes allowed), or None."""
    base = path.lower()
    for suffix in COMPRESSIONS:
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    return FORMATS.get(posixpath.splitext(base)[1])


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem and path for a local path or a URI (s3://, gs://, hdfs://...)."""
    if "://" in uri:
        found: tuple[pafs.FileSystem, str] = pafs.FileSystem.from_uri(uri)
        return found
    return pafs.LocalFileSystem(), posixpath.abspath(uri) if not uri.startswith("/") else uri


def _join(uri: str, path: str) -> str:
    if "://" in uri:
        scheme = uri.split("://", 1)[0]
        return f"{scheme}://{path.lstrip('/')}" if scheme != "file" else f"file://{path}"
    return path


def _has_glob(path: str) -> bool:
    return any(ch in path for ch in "*?[")


def discover(inputs: list[str], text_format: str | None = None) -> list[Shard]:
    """Expand inputs into shards sorted by name, each file once.

    A folder is searched recursively for files of a known format; a glob matches files; a file
    is taken as it is (its format from its extension, or `text_format` if given).
    """
    found: dict[str, Shard] = {}
    for item in inputs:
        fs, path = filesystem(item)
        if _has_glob(path):
            root = path
            while _has_glob(root):
                root = posixpath.dirname(root)
            selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
            infos = [
                info
                for info in fs.get_file_info(selector)
                if info.type == pafs.FileType.File and fnmatch.fnmatch(info.path, path)
            ]
            if not infos:
                raise InputError(item, "no file matches this pattern")
        else:
            info = fs.get_file_info(path)
            if info.type == pafs.FileType.NotFound:
                raise InputError(item, "no such file or folder")
            if info.type == pafs.FileType.Directory:
                root = path
                selector = pafs.FileSelector(path, recursive=True)
                infos = [
                    i
                    for i in fs.get_file_info(selector)
                    if i.type == pafs.FileType.File
                    and shard_format(i.path)
                    and not posixpath.basename(i.path).startswith((".", "_"))
                ]
                if not infos:
                    raise InputError(item, "folder holds no .parquet, .jsonl(.gz/.zst) or .txt file")
            else:
                root = posixpath.dirname(path)
                infos = [info]
        for info in infos:
            fmt = shard_format(info.path) or text_format
            if fmt is None:
                raise InputError(
                    _join(item, info.path),
                    "unknown format (expected .parquet, .jsonl, .json, .txt, optionally .gz/.zst)",
                )
            name = posixpath.relpath(info.path, root) if root else posixpath.basename(info.path)
            uri = _join(item, info.path)
            mtime = info.mtime.timestamp() if info.mtime is not None else 0.0
            found.setdefault(uri, Shard(uri, name, fmt, info.size or 0, mtime))
    shards = sorted(found.values(), key=lambda s: (s.name, s.uri))
    names = [s.name for s in shards]
    if len(set(names)) != len(names):
        # Two roots with the same relative names: fall back to full paths so ids stay unique.
        shards = sorted(
            (Shard(s.uri, s.uri, s.format, s.size, s.mtime) for s in shards), key=lambda s: s.name
        )
    return [Shard(s.uri, s.name, s.format, s.size, s.mtime, index) for index, s in enumerate(shards)]
