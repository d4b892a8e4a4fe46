"""A hook that lets chosen services run only inside a daily UTC window:
outside it, their task runs and mirror passes are deferred (skipped
until the next tick or poll). Other services always run.

Settings: `start = "HH:MM"`, `end = "HH:MM"` (UTC; a window may wrap past
midnight), `services = "mirror,gc"` (default: `mirror`).
"""

from wit_world import exports
from componentize_py_types import Err
from wit_world.exports import hook

# State lives in module globals, set in `configure`: componentize-py makes
# a new instance of the class for every call, so an attribute set on
# `self` in `configure` is gone by the next call (an AttributeError,
# which sleet shows with this advice).
window = None


def minute_of(text):
    hours, _, minutes = text.partition(":")
    if not (hours.isdigit() and minutes.isdigit() and int(hours) < 24 and int(minutes) < 60):
        raise Err(f"expected HH:MM (UTC), got {text!r}")
    return int(hours) * 60 + int(minutes)


class Hook(exports.Hook):
    def configure(self, cfg):
        global window
        settings = dict(cfg)
        unknown = set(settings) - {"start", "end", "services"}
        if unknown:
            raise Err(f"unknown setting {sorted(unknown)[0]!r} (expected start, end, services)")
        if "start" not in settings or "end" not in settings:
            raise Err("start and end are required")
        services = [s.strip() for s in settings.get("services", "mirror").split(",")]
        window = (minute_of(settings["start"]), minute_of(settings["end"]), services)

    def pre_task(self, ctx):
        if window is None:
            return hook.Decision_Fail("py-window-hook was not configured")
        start, end, services = window
        if ctx.service not in services:
            return hook.Decision_Allow()
        # The host's clock, not the guest's: tests and replays drive it.
        minute = ctx.now_unix_ms // 60_000 % (24 * 60)
        inside = start <= minute < end if start <= end else minute >= start or minute < end
        if inside:
            return hook.Decision_Allow()
        span = f"{start // 60:02}:{start % 60:02}-{end // 60:02}:{end % 60:02}"
        return hook.Decision_Skip(f"outside the maintenance window {span} UTC")

    def post_task(self, ctx, outcome):
        pass
