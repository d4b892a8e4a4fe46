// A copier that moves each object with the host's `copyTo`: the bytes
// never enter the plugin, and the copy is server-side wherever both roots
// share a store. The copier to start from: it is as fast as the host's
// own copy whatever language it is written in.
//
// Settings: none.

export const copier = {
  describe() {
    // maxBatch 0: the host's default batch size.
    return { name: "js-copy-copier", version: "0.1.0", maxBatch: 0 };
  },

  // A thrown value becomes the `err` of configure's result: sleet reports
  // it as a config problem.
  configure(cfg) {
    for (const [key] of cfg) {
      throw `js-copy-copier takes no settings, got "${key}"`;
    }
  },

  copy(src, dst, paths) {
    return paths.map((path) => {
      try {
        return { path, outcome: { tag: "ok", val: src.copyTo(path, dst, path) } };
      } catch (e) {
        // A store call that failed throws its store-error as `payload`.
        return { path, outcome: { tag: "err", val: storeError(e) } };
      }
    });
  },
};

function storeError(e) {
  if (e && e.payload && typeof e.payload.kind === "string") {
    return e.payload;
  }
  return { kind: "other", message: String(e) };
}
