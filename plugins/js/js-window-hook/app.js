// A hook that lets chosen services run only inside a daily UTC window:
// outside it, their task runs and mirror passes are deferred (skipped
// until the next tick or poll). Other services always run.
//
// Settings: `start = "HH:MM"`, `end = "HH:MM"` (UTC; a window may wrap past
// midnight), `services = "mirror,gc"` (default: `mirror`).

// State lives in module variables, set in `configure`: sleet makes a
// fresh instance for every call and calls `configure` on it first, so
// nothing outlives a call. An uncaught exception is shown in sleet's
// error and log, with its line.
let window = null;

function minuteOf(text) {
  const match = /^(\d{1,2}):(\d{2})$/.exec(text);
  if (!match || Number(match[1]) > 23 || Number(match[2]) > 59) {
    throw `expected HH:MM (UTC), got "${text}"`;
  }
  return Number(match[1]) * 60 + Number(match[2]);
}

const hh = (minute) =>
  `${String(Math.floor(minute / 60)).padStart(2, "0")}:${String(minute % 60).padStart(2, "0")}`;

export const hook = {
  configure(cfg) {
    const settings = new Map(cfg);
    for (const key of settings.keys()) {
      if (!["start", "end", "services"].includes(key)) {
        throw `unknown setting "${key}" (expected start, end, services)`;
      }
    }
    if (!settings.has("start") || !settings.has("end")) {
      throw "start and end are required";
    }
    window = {
      start: minuteOf(settings.get("start")),
      end: minuteOf(settings.get("end")),
      services: (settings.get("services") ?? "mirror").split(",").map((s) => s.trim()),
    };
  },

  // Variants are { tag, val }: allow, skip(reason), fail(reason).
  preTask(ctx) {
    if (window === null) {
      return { tag: "fail", val: "js-window-hook was not configured" };
    }
    if (!window.services.includes(ctx.service)) {
      return { tag: "allow" };
    }
    // The host's clock (a BigInt of milliseconds), not the guest's.
    const minute = Number((ctx.nowUnixMs / 60000n) % 1440n);
    const { start, end } = window;
    const inside = start <= end ? start <= minute && minute < end : minute >= start || minute < end;
    if (inside) {
      return { tag: "allow" };
    }
    return { tag: "skip", val: `outside the maintenance window ${hh(start)}-${hh(end)} UTC` };
  },

  postTask(ctx, outcome) {},
};
