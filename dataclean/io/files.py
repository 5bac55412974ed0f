"""File operations on any filesystem pyarrow supports, for local paths and URIs alike.

Everything dataclean reads or writes outside the input readers goes through this module and
`dataclean.io.writers`, so output and scratch folders may live on a local disk, S3, GCS or HDFS:
the path or URI picks the filesystem (`dataclean.io.shards.filesystem`) and names below it are
joined with `posixpath.join`, which keeps the scheme. Nothing assumes a disk shared by the
driver and the workers beyond the folder the user gave.

Files appear under their final name only when complete (`atomic_output`): written under a hidden
temporary name in the same folder, then moved. A move is a rename on local disks and HDFS and a
server-side copy on object stores; it is needed there too, because closing an S3 stream completes
the upload even after an error, which would leave a partial object under the final name. Local
files are memory-mapped for reading, so scratch files on a local disk cost what `open` did.
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from dataclean.io.shards import filesystem


def exists(uri: str) -> bool:
    """Whether a file or folder exists."""
    fs, path = filesystem(uri)
    return bool(fs.get_file_info(path).type != pafs.FileType.NotFound)


def make_dirs(uri: str) -> None:
    """Create a folder and its parents (a no-op when it exists)."""
    fs, path = filesystem(uri)
    fs.create_dir(path, recursive=True)


def remove_tree(uri: str) -> None:
    """Remove a folder and everything under it, if it exists."""
    fs, path = filesystem(uri)
    if fs.get_file_info(path).type == pafs.FileType.Directory:
        fs.delete_dir(path)


def fresh_folder(uri: str) -> str:
    """An empty folder at `uri` (whatever was there is removed); returns `uri`."""
    remove_tree(uri)
    make_dirs(uri)
    return uri


def list_files(folder: str, suffix: str = "", prefix: str = "") -> list[str]:
    """Final (non-hidden) files directly in `folder` named `prefix*suffix`, sorted by name.

    Returned as `folder/name`, in the form the folder was given (path or URI). A missing folder
    has no files.
    """
    fs, path = filesystem(folder)
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    names = sorted(
        name
        for name in (posixpath.basename(info.path) for info in infos if info.type == pafs.FileType.File)
        if name.startswith(prefix) and name.endswith(suffix) and not name.startswith(".")
    )
    return [posixpath.join(folder, name) for name in names]


def open_input(uri: str) -> pa.NativeFile:
    """A random-access reader (memory-mapped for local files); use it as a context manager."""
    fs, path = filesystem(uri)
    if isinstance(fs, pafs.LocalFileSystem):
        return pa.memory_map(path)
    return fs.open_input_file(path)


@contextlib.contextmanager
def atomic_output(uri: str) -> Iterator[pa.NativeFile]:
    """A stream to write `uri`, which appears under its name only if the block completes.

    The folder must exist (`make_dirs`); on an error the temporary file is removed.
    """
    fs, path = filesystem(uri)
    folder, name = posixpath.split(path)
    temp = posixpath.join(folder, f".{name}.tmp")
    try:
        with fs.open_output_stream(temp) as sink:
            yield sink
    except BaseException:
        with contextlib.suppress(OSError):
            fs.delete_file(temp)
        raise
    fs.move(temp, path)


def read_parquet(uri: str, columns: Sequence[str] | None = None, schema: pa.Schema | None = None) -> pa.Table:
    """A whole Parquet file (or some of its columns), read as `schema` when given."""
    with open_input(uri) as source:
        return pq.read_table(source, columns=columns, schema=schema)


def write_parquet(uri: str, table: pa.Table, compression: str = "snappy") -> None:
    """Write a table as one Parquet file, atomically."""
    with atomic_output(uri) as sink:
        pq.write_table(table, sink, compression=compression)


def parquet_metadata(uri: str) -> pq.FileMetaData:
    """A Parquet file's footer: row counts and column sizes, no data read."""
    with open_input(uri) as source:
        return pq.ParquetFile(source).metadata


def save_array(uri: str, array: np.ndarray) -> None:
    """Write a numpy array in .npy format, atomically."""
    with atomic_output(uri) as sink:
        np.lib.format.write_array(sink, np.asanyarray(array), allow_pickle=False)


def load_array(uri: str) -> np.ndarray:
    """Read an array written by `save_array` (a writable array of its own)."""
    fs, path = filesystem(uri)
    with fs.open_input_stream(path) as source:
        array: np.ndarray = np.lib.format.read_array(source, allow_pickle=False)
    return array
