"""A copier that moves each object with the host's `copy-to`: the bytes
never enter the plugin, and the copy is server-side wherever both roots
share a store. The copier to start from: it is as fast as the host's
own copy whatever language it is written in.

Settings: none.
"""

from wit_world import exports
from componentize_py_types import Err, Ok
from wit_world.exports import copier


class Copier(exports.Copier):
    def describe(self) -> copier.Info:
        # max_batch 0: the host's default batch size.
        return copier.Info(name="py-copy-copier", version="0.1.0", max_batch=0)

    def configure(self, cfg):
        # Nothing is kept here. Were there settings, they would go in module
        # globals: componentize-py makes a new instance for every call, so
        # an attribute set on `self` now is gone when `copy` runs.
        # An error is raised as Err(...): sleet reports it as a config problem.
        for key, _ in cfg:
            raise Err(f"py-copy-copier takes no settings, got {key!r}")

    def copy(self, src, dst, paths):
        results = []
        for path in paths:
            try:
                outcome = Ok(src.copy_to(path, dst, path))
            except Err as failed:
                # The host's store-error, passed on as this object's result.
                outcome = failed
            results.append(copier.CopyResult(path=path, outcome=outcome))
        return results
