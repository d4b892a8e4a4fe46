"""A compaction filter that expires entries older than a configured age,
by the time they were written (`create_ts`) against the compaction's
clock.

Settings: `max_age` (required): `500ms`, `90s`, `15m`, `12h` or `7d`.

An expired value becomes a tombstone, so an older version of its key in a
lower sorted run cannot show through again; in the oldest run, where
nothing lies below, it is dropped outright. Expired merge operands are
dropped. Entries that snapshots hold (at or above `retention_min_seq`)
and entries without a write time are kept.
"""

import re

from wit_world import exports
from componentize_py_types import Err
from wit_world.exports import compaction_filter as cf

UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# State lives in module globals, set in `configure`: componentize-py makes
# a new instance of the class for every call, so an attribute set on
# `self` in `configure` is gone by the next call (an AttributeError,
# which sleet shows with this advice).
max_age_ms = None
job = None


def parse_age(text):
    match = re.fullmatch(r"(\d+)(ms|s|m|h|d)", text.strip())
    if not match or int(match[1]) == 0:
        raise Err(f"max_age {text!r} must be a whole number above zero with a unit of ms, s, m, h or d")
    return int(match[1]) * UNIT_MS[match[2]]


class CompactionFilter(exports.CompactionFilter):
    def configure(self, cfg):
        global max_age_ms
        for key, value in cfg:
            if key != "max_age":
                raise Err(f"py-ttl-filter has no setting {key!r}")
            max_age_ms = parse_age(value)
        if max_age_ms is None:
            raise Err('max_age is required, such as max_age = "7d"')

    def start_job(self, next_job):
        global job
        job = next_job

    # Values and decisions are classes: cf.Value_Put(bytes),
    # cf.Value_Tombstone(); cf.Decision_Keep(), cf.Decision_Drop(), ...
    def filter(self, entry):
        if max_age_ms is None or job is None:
            raise Err("filter called before configure and start-job")
        held_by_snapshot = job.retention_min_seq is not None and entry.seq >= job.retention_min_seq
        expired = entry.create_ts is not None and job.now_ms - entry.create_ts > max_age_ms
        if held_by_snapshot or not expired:
            return cf.Decision_Keep()
        if isinstance(entry.value, cf.Value_Tombstone):
            return cf.Decision_Keep()
        if isinstance(entry.value, cf.Value_Merge) or job.is_dest_last_run:
            return cf.Decision_Drop()
        return cf.Decision_Tombstone()

    def end_job(self):
        global job
        job = None
