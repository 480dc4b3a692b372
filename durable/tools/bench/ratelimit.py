"""A named rate limit held across workers (`durable_bench --rate-limit R`): calls as the model provider sees them.

Runs of `bench-agents-limited` make five model calls each, every one naming the limit `bench`
(`ctx.activity(..., limit="bench")`), on W real workers given `DURABLE_LIMITS={"bench": {"rate": "R/s"}}` in
their environment (JSON). The fake model server notes when each call arrives; the report is the busiest
1-second sliding window (what the provider's own limiter would count) and the throughput over the steady part
(the first and last second left out: the ramp-up and the tail), and the busiest window over the times the workers
say they sent each call (an `X-Sent-At` header): arrival times are stamped by the benchmark's own event loop,
which a loaded machine delays and bunches; the two together tell the limiter's excess from the stamp's. Named limits are issue 37's part 3: on code
whose `ctx.activity` takes no `limit=` the command says so and measures nothing.
"""
from __future__ import annotations

import inspect
import math

from durable.tools.bench.agents import CALLS, agents_workflow
from durable.tools.bench.figures import RateResult
from durable.tools.bench.fleet import Fleet, Stopped, limits_env, run_fleet
from durable.tools.bench.model_server import busiest_window, steady_throughput

SECONDS_OF_CALLS = 10  # by default, enough runs for this many seconds of calls at the limit's rate
NO_LIMITS = ("durable_bench --rate-limit needs named limits (issue 37): this code's ctx.activity takes no "
             "limit= argument, so there is no limit to measure")


def limits_supported() -> bool:
    """Whether the step context's `activity` takes `limit=` (a parameter of its own, not one of the call's kwargs)."""
    from durable.runtime.context import StepContext

    parameters = inspect.signature(StepContext.activity).parameters
    return "limit" in parameters and parameters["limit"].kind is not inspect.Parameter.VAR_KEYWORD


def default_runs(per_second: int) -> int:
    return max(1, math.ceil(per_second * SECONDS_OF_CALLS / CALLS))


def measure_rate_limit(per_second: int, runs: int, call_ms: float, fleet: Fleet, timeout: float,
                       keep: bool = False) -> RateResult:
    if not limits_supported():
        raise Stopped(NO_LIMITS)
    rate = f"{per_second}/s"
    done = run_fleet(agents_workflow(limited=True).name, runs, call_ms, fleet, timeout, name="bench-rate",
                     env=limits_env(rate), keep=keep)
    return RateResult(rate, fleet.workers, busiest_window(done.calls.arrivals),
                      steady_throughput(done.calls.arrivals), done.calls.total, done.calls.duplicates,
                      busiest_sent=busiest_window(done.calls.sent))
