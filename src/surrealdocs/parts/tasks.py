"""Running coroutines together so that one failure stops them all."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


async def all_or_cancel(work: Sequence[Coroutine[Any, Any, T]]) -> list[T]:
    """Run coroutines concurrently; when one raises, cancel the others (so nothing keeps
    writing after the call has failed) and raise its error."""
    tasks = [asyncio.ensure_future(w) for w in work]
    if not tasks:
        return []
    try:
        _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    if pending:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    return [task.result() for task in tasks]
