"""A deliberately hostile copier for sleet's containment tests, in
Python. Its `mode` setting picks the attack; never an example to follow.

- `hoard`: keeps every chunk it reads and asks for more memory without
  end; the host stops it at its memory budget.
- `lie`: reports every object copied, with the source's size, and copies
  nothing; the host's verification catches it.
"""

from wit_world import exports
from componentize_py_types import Err, Ok
from wit_world.exports import copier
from wit_world.imports import types

mode = ""


class Copier(exports.Copier):
    def describe(self) -> copier.Info:
        return copier.Info(name="py-hostile-copier", version="0.0.0", max_batch=0)

    def configure(self, cfg):
        global mode
        mode = dict(cfg).get("mode", "")
        if mode not in ("hoard", "lie"):
            raise Err(f"mode must be hoard or lie, got {mode!r}")

    def copy(self, src, dst, paths):
        if mode == "hoard":
            hoard = []
            while True:
                hoard.append(bytearray(8 * 1024 * 1024))
        results = []
        for path in paths:
            meta = src.head(path)
            size = 0 if meta is None else meta.size
            results.append(copier.CopyResult(path=path, outcome=Ok(types.ObjectMeta(path=path, size=size))))
        return results
