// A copier that streams every object through the plugin: it reads the
// source in chunks, writes them to the destination, and checks that it
// wrote as many bytes as the source holds. Start here when a copier must
// see the bytes (to transform, checksum or filter them); otherwise prefer
// `copyTo` (js-copy-copier).
//
// Settings: `chunk_kib` (1-1024, default 1024): bytes per read.
//
// Memory: what a call reads is not given back within the call (each `read`
// result is lifted into fresh guest memory by componentize-js's bindings,
// which do not free it, and the Uint8Array is a second copy; measured, a
// call holds about 9 MiB plus twice the bytes it read). This copier
// asks for one object per call (`maxBatch` 1), so `memory_mib` must
// exceed twice the largest object by 16 MiB or so: 144 for SlateDB's
// default 64 MiB L0 SSTs. `copyTo` (js-copy-copier) has no such cost.

// State lives in module variables, set in `configure`: sleet makes a
// fresh instance for every call and calls `configure` on it first, so
// nothing outlives a call. An uncaught exception is shown in sleet's
// error and log, with its line.
let chunkBytes = 1024 * 1024;

export const copier = {
  describe() {
    // One object per call: a call holds what it reads (above).
    return { name: "js-stream-copier", version: "0.1.0", maxBatch: 1 };
  },

  configure(cfg) {
    for (const [key, value] of cfg) {
      if (key !== "chunk_kib") {
        throw `unknown setting "${key}" (expected chunk_kib)`;
      }
      const kib = Number(value);
      if (!Number.isInteger(kib) || kib < 1 || kib > 1024) {
        throw `chunk_kib must be 1..=1024, got "${value}"`;
      }
      chunkBytes = kib * 1024;
    }
  },

  copy(src, dst, paths) {
    return paths.map((path) => {
      try {
        return { path, outcome: { tag: "ok", val: copyOne(src, dst, path) } };
      } catch (e) {
        return { path, outcome: { tag: "err", val: storeError(e) } };
      }
    });
  },
};

// Streams one object, or throws. Readers and writers are host resources:
// dispose of them at once rather than leave them to the garbage collector,
// since a call may hold only a few open at a time. A writer disposed
// before `finish` is discarded, so a failed copy never leaves half an
// object behind.
function copyOne(src, dst, path) {
  const reader = src.openRead(path, 0n);
  try {
    const writer = dst.openWrite(path);
    try {
      let copied = 0n;
      for (;;) {
        const chunk = reader.read(chunkBytes);
        if (chunk.length === 0) {
          break;
        }
        writer.write(chunk);
        copied += BigInt(chunk.length);
      }
      const meta = src.head(path);
      if (meta === undefined || meta.size !== copied) {
        throw { payload: { kind: "other", message: `${path}: read ${copied} bytes, the source changed` } };
      }
      return writer.finish();
    } finally {
      writer[Symbol.dispose]();
    }
  } finally {
    reader[Symbol.dispose]();
  }
}

function storeError(e) {
  if (e && e.payload && typeof e.payload.kind === "string") {
    return e.payload;
  }
  return { kind: "other", message: String(e) };
}
