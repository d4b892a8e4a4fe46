"""TEST FIXTURE, not an example: the commonest mistake of a Python plugin
author, kept so tests can show what sleet tells them. Its settings are
kept on `self` in `configure`, but componentize-py makes a new `Copier`
for every call, so `copy` finds no `self.mode` and raises
`AttributeError`. `sleet plugin check --exercise` and a node both say so
in Python's words. The right way: a module global (see py-stream-copier).
"""

from wit_world import exports
from componentize_py_types import Err, Ok
from wit_world.exports import copier


class Copier(exports.Copier):
    def describe(self) -> copier.Info:
        return copier.Info(name="py-mistake-copier", version="0.1.0", max_batch=0)

    def configure(self, cfg):
        # The mistake: this attribute is gone by the time `copy` runs.
        self.mode = dict(cfg).get("mode", "copy-to")

    def copy(self, src, dst, paths):
        results = []
        for path in paths:
            if self.mode != "copy-to":
                raise Err(f"unknown mode {self.mode!r}")
            try:
                outcome = Ok(src.copy_to(path, dst, path))
            except Err as failed:
                outcome = failed
            results.append(copier.CopyResult(path=path, outcome=outcome))
        return results
