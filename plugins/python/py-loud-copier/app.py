"""TEST FIXTURE, not an example: a copier that prints a megabyte to stderr
in every call (sleet keeps the last 8 KiB of a call's output and counts
the rest), then copies with the host's `copy-to`; with `fail = "yes"` it
raises after printing.
"""

import sys

from wit_world import exports
from componentize_py_types import Err, Ok
from wit_world.exports import copier

fail = False


class Copier(exports.Copier):
    def describe(self) -> copier.Info:
        return copier.Info(name="py-loud-copier", version="0.1.0", max_batch=0)

    def configure(self, cfg):
        global fail
        fail = dict(cfg).get("fail") == "yes"

    def copy(self, src, dst, paths):
        line = "x" * 1023 + "\n"
        for _ in range(1024):
            sys.stderr.write(line)
        if fail:
            raise RuntimeError("loud and failing, as configured")
        results = []
        for path in paths:
            try:
                outcome = Ok(src.copy_to(path, dst, path))
            except Err as failed:
                outcome = failed
            results.append(copier.CopyResult(path=path, outcome=outcome))
        return results
