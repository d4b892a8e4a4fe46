// A merge operator for counters: every value and operand is a u64,
// little-endian, and merging adds them, wrapping at 2**64 as a native
// counter's `wrapping_add` does. A database written with that operator in
// Rust (or any language) can be compacted by sleet with this one.
//
// Settings: none.

function counter(bytes, what) {
  if (bytes.length !== 8) {
    throw `${what} is ${bytes.length} bytes; a counter is 8 (u64, little-endian)`;
  }
  return new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
}

export const mergeOperator = {
  configure(cfg) {
    for (const [key] of cfg) {
      throw `js-counter-merge takes no settings, got "${key}"`;
    }
  },

  // `existing` is undefined when the key has no value below the operands.
  mergeBatch(key, existing, operands) {
    let total = existing === undefined ? 0n : counter(existing, "the existing value");
    for (const operand of operands) {
      total = BigInt.asUintN(64, total + counter(operand, "an operand"));
    }
    const out = new Uint8Array(8);
    new DataView(out.buffer).setBigUint64(0, total, true);
    return out;
  },
};
