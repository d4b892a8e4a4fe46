"""TEST FIXTURE, not an example: a hook that keeps its settings on `self`
in `configure`; componentize-py makes a new `Hook` for every call, so
`pre_task` raises `AttributeError`. The right way: a module global (see
py-window-hook).
"""

from wit_world import exports
from wit_world.exports import hook


class Hook(exports.Hook):
    def configure(self, cfg):
        # The mistake: this attribute is gone by the time `pre_task` runs.
        self.services = dict(cfg).get("services", "mirror").split(",")

    def pre_task(self, ctx):
        if ctx.service in self.services:
            return hook.Decision_Allow()
        return hook.Decision_Allow()

    def post_task(self, ctx, outcome):
        pass
