"""A merge operator for counters: every value and operand is a u64,
little-endian, and merging adds them, wrapping at 2**64 as a native
counter's `wrapping_add` does. A database written with that operator in
Rust (or any language) can be compacted by sleet with this one.

Settings: none.
"""

from wit_world import exports
from componentize_py_types import Err


def counter(value, what):
    if len(value) != 8:
        raise Err(f"{what} is {len(value)} bytes; a counter is 8 (u64, little-endian)")
    return int.from_bytes(value, "little")


class MergeOperator(exports.MergeOperator):
    def configure(self, cfg):
        # Nothing is kept here. Were there settings, they would go in module
        # globals: componentize-py makes a new instance for every call, so
        # an attribute set on `self` now is gone when `merge_batch` runs.
        for key, _ in cfg:
            raise Err(f"py-counter-merge takes no settings, got {key!r}")

    def merge_batch(self, key, existing, operands):
        total = 0 if existing is None else counter(existing, "the existing value")
        for operand in operands:
            total = (total + counter(operand, "an operand")) % (1 << 64)
        return total.to_bytes(8, "little")
