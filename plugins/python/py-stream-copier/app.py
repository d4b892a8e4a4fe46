"""A copier that streams every object through the plugin: it reads the
source in chunks, writes them to the destination, and checks that it
wrote as many bytes as the source holds. Start here when a copier must
see the bytes (to transform, checksum or filter them); otherwise prefer
`copy-to` (py-copy-copier).

Settings: `chunk_kib` (1-1024, default 1024): bytes per read.

Memory: what a call reads is not given back within the call (each `read`
result is lifted into fresh guest memory by componentize-py's bindings;
measured, a call holds about 12 MiB plus every byte it read). This copier asks for one object per call (`max_batch` 1),
so `memory_mib` must exceed the largest object by 16 MiB or so: 80 for
SlateDB's default 64 MiB L0 SSTs. `copy-to` (py-copy-copier) has no such
cost.
"""

from wit_world import exports
from componentize_py_types import Err, Ok
from wit_world.exports import copier
from wit_world.imports import types

# State lives in module globals, set in `configure`: componentize-py makes
# a new instance of the class for every call, so an attribute set on
# `self` in `configure` is gone by the next call (an AttributeError,
# which sleet shows with this advice).
chunk_bytes = 1024 * 1024


def copy_one(src, dst, path):
    """Streams one object, or raises Err(store-error)."""
    with src.open_read(path, 0) as reader, dst.open_write(path) as writer:
        copied = 0
        while True:
            chunk = reader.read(chunk_bytes)
            if not chunk:
                break
            writer.write(chunk)
            copied += len(chunk)
        # Leaving the `with` block unfinished drops the writer: the host
        # discards the object, so a failed copy never leaves half of one.
        meta = src.head(path)
        if meta is None or meta.size != copied:
            raise Err(types.StoreError(kind="other", message=f"{path}: read {copied} bytes, the source changed"))
        return writer.finish()


class Copier(exports.Copier):
    def describe(self) -> copier.Info:
        # One object per call: a call holds every byte it reads (above).
        return copier.Info(name="py-stream-copier", version="0.1.0", max_batch=1)

    def configure(self, cfg):
        global chunk_bytes
        for key, value in cfg:
            if key != "chunk_kib":
                raise Err(f"unknown setting {key!r} (expected chunk_kib)")
            if not value.isdigit() or not 1 <= int(value) <= 1024:
                raise Err(f"chunk_kib must be 1..=1024, got {value!r}")
            chunk_bytes = int(value) * 1024

    def copy(self, src, dst, paths):
        results = []
        for path in paths:
            try:
                outcome = Ok(copy_one(src, dst, path))
            except Err as failed:
                outcome = failed
            results.append(copier.CopyResult(path=path, outcome=outcome))
        return results
