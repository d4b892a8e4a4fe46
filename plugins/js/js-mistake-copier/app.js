// TEST FIXTURE, not an example: a copier whose `copy` reads a setting
// `configure` never stored, so every call throws a TypeError. sleet shows
// the exception and the line it came from, in a node's error and log and
// in `sleet plugin check --exercise`.

let settings;

export const copier = {
  describe() {
    return { name: "js-mistake-copier", version: "0.1.0", maxBatch: 0 };
  },

  configure(cfg) {
    // The mistake: the settings are read but never kept.
    const read = new Map(cfg);
    read.get("prefix");
  },

  copy(src, dst, paths) {
    const prefix = settings.get("prefix") ?? "";
    return paths.map((path) => ({
      path,
      outcome: { tag: "ok", val: src.copyTo(path, dst, prefix + path) },
    }));
  },
};
