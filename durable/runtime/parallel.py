"""ctx.parallel: several activities and side effects of one step at once, each recorded under its own index.

Everything that writes happens on the step's thread, in the order the calls were given: each call's
index is reserved, each side effect is prepared and re-entered, then committed STARTED right before it
is sent. Only the external calls themselves (an activity's function, a downstream's request) run on a
bounded pool of threads (DURABLE_PARALLEL_CALLS), with the lease kept alive (and fenced) for as long as
any of them is in flight. Each answer is recorded on the step's thread as it comes, under the index
reserved for it, so the records of a visit never depend on which call finished first (invariant 16),
and a visit re-executed after a crash or a retry reuses what finished and calls only the rest.

Django's database connections are per thread, and the run store's fenced writes and the step write in
flight live on the step thread's connection: that is why no write happens on the pool.
"""
from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from django.db import connections

from durable import tracing
from durable.conf import durable_settings
from durable.context import Call, Effect
from durable.engine.costs import UsageOf
from durable.engine.errors import LeaseLost, NeedsAttention, ParallelCallsFailed
from durable.runtime import limits, pausing, side_effects
from durable.runtime.heartbeat import Heartbeat, give_back_connection, lease_kept
from durable.runtime.visit import Visit

log = logging.getLogger("durable.activity")


@dataclass
class _Pending:
    """A call still to make: what runs on the pool, and what records its answer on the step's thread (an
    activity's with the others that answered with it, `_record_together`; a side effect's by `record`)."""

    position: int
    label: str
    run: Callable[[], Any]
    record: Callable[[Any], Any] | None = None  # a side effect's Commit
    start: Callable[[], None] | None = None  # a side effect's STARTED, committed right before it is sent
    failed: Callable[[Exception], Any] | None = None  # a side effect's failure, recorded in the ledger
    activity: tuple[str, int] | None = None  # an activity's name and index: recorded with others that answered
    usage: UsageOf | None = None  # a model call's usage function
    limit: str | None = None  # an activity's named limit: room taken before it is sent
    taken: limits.Taken | None = None  # ...the room it took, given back when it answers


def run_group(visit: Visit, calls: tuple[Call | Effect, ...]) -> list[Any]:
    """Run the calls at once; their results in the order given, each recorded under its own index."""
    if calls:
        pausing.before_call(visit.lease)  # a pause asked: PauseSeen, before anything of the group is written
    results: list[Any] = [None] * len(calls)
    pending: list[_Pending] = []
    described: list[dict[str, Any]] = []
    for position, call in enumerate(calls):  # indexes reserved and side effects prepared in the order given
        if isinstance(call, Call):
            _plan_call(visit, position, call, results, pending, described)
        elif isinstance(call, Effect):
            _plan_effect(visit, position, call, results, pending, described)
        else:
            raise TypeError(f"ctx.parallel takes ctx.call(...) and ctx.effect(...), got {type(call).__name__}")
    model_calls = [call.label for call in pending if call.usage is not None]
    if model_calls:  # BudgetExhausted before anything is sent: the run waits, no model is asked
        visit.meter.before_model_call(", ".join(model_calls))
    visit.store.record_parallel(visit.lease, visit.step, described)
    if pending:
        _make(visit, pending, results, len(calls))
    return [_as_asked(call, result) for call, result in zip(calls, results, strict=True)]


def _as_asked(call: Call | Effect, result: Any) -> Any:
    """An activity's result as the model its `returns=` names, live and on replay alike; anything else as recorded."""
    if isinstance(call, Call) and call.returns is not None:
        return call.returns.model_validate(result)  # type: ignore[attr-defined]
    return result


def _plan_call(visit: Visit, position: int, call: Call, results: list[Any], pending: list[_Pending],
               described: list[dict[str, Any]]) -> None:
    index, recorded = visit.reserve(call.name)
    described.append({"call_index": index, "name": call.name, "reused": recorded is not None})
    if recorded is not None:
        results[position] = visit.reused(call.name, recorded)
        return

    made = tracing.in_activity(visit, call.name, index, lambda: call.fn(*call.args, **call.kwargs))
    pending.append(_Pending(position, f"{call.name} #{index}", made, activity=(call.name, index), usage=call.usage,
                            limit=call.limit))


def _give_back(pending: list[_Pending], error: BaseException | None) -> None:
    """On the way out of a failed group: each room still taken given back (a slot that cannot be is freed with
    the lease that took it)."""
    for call in pending:
        taken, call.taken = call.taken, None
        try:
            limits.give_back(taken, error=error)
        except Exception:
            log.warning("room in limit %s not given back; it frees with the run's lease", call.limit, exc_info=True)


def _plan_effect(visit: Visit, position: int, effect: Effect, results: list[Any], pending: list[_Pending],
                 described: list[dict[str, Any]]) -> None:
    begun = side_effects.begin(visit, action=effect.action, business_key=effect.business_key,
                               downstream=effect.downstream, payload=effect.payload)
    send = begun if isinstance(begun, side_effects.Send) else None
    described.append({"action": effect.action, "business_key": effect.business_key,
                      "operation_id": send.row.operation_id if send else None, "reused": send is None})
    if send is None:
        results[position] = begun
        tracing.recorded_effect(visit, effect.action, effect.business_key)
        return
    store, lease = visit.store, visit.lease
    pending.append(_Pending(position, effect.action, send.call,
                            record=lambda outcome: side_effects.finish(store, lease, send, outcome),
                            start=lambda: send.start(store, lease),
                            failed=lambda exc: side_effects.settle_failure(store, lease, send, exc)))


def _make(visit: Visit, pending: list[_Pending], results: list[Any], of: int) -> None:
    """Send every pending call on the pool, record each answer as it comes; raise once all are settled. A call
    under a limit is sent once it has room: while calls of the group are in flight it waits for one to answer
    (which may give room back); with none in flight its run parks, and what answered is reused when it is back."""
    errors: list[tuple[int, str, BaseException]] = []
    size = min(len(pending), durable_settings.DURABLE_PARALLEL_CALLS)
    pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix=f"durable-parallel-{visit.step}")
    try:
        with lease_kept(visit.store, visit.lease) as kept:  # no second worker calls while any may be in flight
            running: dict[Future[Any], _Pending] = {}
            unsent = list(pending)
            while unsent or running:
                while unsent and _has_room(visit, unsent[0], parked_if_not=not running):
                    call = unsent.pop(0)  # Prepare + STARTED committed before each downstream call is submitted
                    if call.start is not None:
                        call.start()
                    running[pool.submit(contextvars.copy_context().run, _on_pool,
                                        limits.on_time(visit, call.taken, call.run))] = call
                if running:
                    _collect(visit, kept, running, results, errors)
    except BaseException as exc:  # the lease lost, a crash, a ledger row moved under us: nothing more is written
        pool.shutdown(wait=False, cancel_futures=True)  # what still runs is abandoned; a sent one stays STARTED
        _give_back(pending, exc)  # best effort: a slot left behind is freed with the lease that took it
        raise
    pool.shutdown(wait=True)
    if errors:
        raise _failure(sorted(errors), of)


def _has_room(visit: Visit, call: _Pending, *, parked_if_not: bool) -> bool:
    """Whether the call may be sent now: it names no limit, or it took room in it (the run parks, Waiting, when it
    has none and nothing of the group is in flight)."""
    if call.limit is None or call.activity is None:
        return True
    call.taken = limits.take(visit, call.limit, call.activity[1], may_park=parked_if_not)
    return call.taken is not None


def _collect(visit: Visit, kept: Heartbeat, running: dict[Future[Any], _Pending], results: list[Any],
             errors: list[tuple[int, str, BaseException]]) -> None:
    """Wait for calls in flight to answer, or the lease's loss (a cancel); record them (activities that answered
    together in one write)."""
    give_back_connection()  # the writes above are done: no connection held while calls are out
    done, _ = wait([*running, kept.loss], return_when=FIRST_COMPLETED)
    if kept.lost:  # taken or cancelled meanwhile: what is in flight is abandoned at once
        raise LeaseLost(f"run {visit.lease.run_id}: lease lost while parallel calls were in flight")
    done = {future for future in done if future in running}
    together = []
    for future in done:
        call = running.pop(future)
        given, call.taken = call.taken, None  # its room back first, its tokens counted
        failed = future.exception()
        limits.give_back(given, error=failed, answer=None if failed else future.result(), usage=call.usage)
        if call.activity is not None and failed is None:
            together.append((call, future))
        else:
            _settle(call, future, results, errors)
    if together:  # activities that answered at about the same time: one write for all of them
        _record_together(visit, together, results, errors)


def _on_pool(fn: Callable[[], Any]) -> Any:
    """A call on a pool thread: any database connection it opened is closed with it (connections are per thread)."""
    try:
        return fn()
    finally:
        connections.close_all()


def _settle(call: _Pending, future: Future[Any], results: list[Any],
            errors: list[tuple[int, str, BaseException]]) -> None:
    """Record one answer on the step's thread: its result, or its failure as the ledger reads it."""
    try:
        try:
            answer = future.result()
        except Exception as exc:
            if call.failed is not None:
                call.failed(exc)  # a side effect's failure is recorded, and raised as the step should see it
            raise
        assert call.record is not None  # an activity that answered is recorded with the others (_record_together)
        results[call.position] = call.record(answer)
    except LeaseLost:
        raise
    except Exception as exc:
        log.info("parallel call %s failed: %s", call.label, exc)
        errors.append((call.position, call.label, exc))


def _record_together(visit: Visit, answered: list[tuple[_Pending, Future[Any]]], results: list[Any],
                     errors: list[tuple[int, str, BaseException]]) -> None:
    """Record the results of activities that answered together in one fenced write, each under its own index
    (model calls with what they used, in one more write when plain activities answered with them)."""
    rows: list[tuple[_Pending, int, str, Any, Any]] = []
    for call, future in answered:
        name, index = call.activity  # type: ignore[misc]
        try:
            answer = future.result()
            rows.append((call, index, name, visit.recordable(name, answer), answer))
        except Exception as exc:  # not storable: that call's error, the others are recorded
            errors.append((call.position, call.label, exc))
    if rows:
        visit.record_together([(index, name, result, answer, call.usage)
                               for call, index, name, result, answer in rows])
    for call, _, _, result, _ in rows:
        results[call.position] = result


def _failure(errors: list[tuple[int, str, BaseException]], of: int) -> BaseException:
    """What the step raises: an operation of unknown outcome waits for an operator first; one failure as it is;
    several named together, retryable only if each is."""
    for _, _, exc in errors:
        if isinstance(exc, NeedsAttention):
            return exc
    if len(errors) == 1:
        return errors[0][2]
    return ParallelCallsFailed([(label, exc) for _, label, exc in errors], of)
