// A compaction filter that expires entries older than a configured age,
// by the time they were written (`createTs`) against the compaction's
// clock.
//
// Settings: `max_age` (required): `500ms`, `90s`, `15m`, `12h` or `7d`.
//
// An expired value becomes a tombstone, so an older version of its key in
// a lower sorted run cannot show through again; in the oldest run, where
// nothing lies below, it is dropped outright. Expired merge operands are
// dropped. Entries that snapshots hold (at or above `retentionMinSeq`)
// and entries without a write time are kept.

const UNIT_MS = { ms: 1n, s: 1000n, m: 60000n, h: 3600000n, d: 86400000n };
// State lives in module variables, set in `configure`: sleet makes a
// fresh instance for every compaction job and calls `configure` on it
// first, so nothing outlives a job.
let maxAgeMs = null;
let job = null;

function parseAge(text) {
  const match = /^(\d+)(ms|s|m|h|d)$/.exec(text.trim());
  if (!match || BigInt(match[1]) === 0n) {
    throw `max_age "${text}" must be a whole number above zero with a unit of ms, s, m, h or d`;
  }
  return BigInt(match[1]) * UNIT_MS[match[2]];
}

export const compactionFilter = {
  configure(cfg) {
    for (const [key, value] of cfg) {
      if (key !== "max_age") {
        throw `js-ttl-filter has no setting "${key}"`;
      }
      maxAgeMs = parseAge(value);
    }
    if (maxAgeMs === null) {
      throw 'max_age is required, such as max_age = "7d"';
    }
  },

  startJob(next) {
    job = next;
  },

  // Values and decisions are variants: { tag: "put", val: bytes },
  // { tag: "tombstone" }; { tag: "keep" }, { tag: "drop" }, ...
  filter(entry) {
    if (maxAgeMs === null || job === null) {
      throw "filter called before configure and start-job";
    }
    const heldBySnapshot = job.retentionMinSeq !== undefined && entry.seq >= job.retentionMinSeq;
    const expired = entry.createTs !== undefined && job.nowMs - entry.createTs > maxAgeMs;
    if (heldBySnapshot || !expired) {
      return { tag: "keep" };
    }
    switch (entry.value.tag) {
      case "tombstone":
        return { tag: "keep" };
      case "merge":
        return { tag: "drop" };
      default:
        return { tag: job.isDestLastRun ? "drop" : "tombstone" };
    }
  },

  endJob() {
    job = null;
  },
};
