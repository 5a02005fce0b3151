"""A process-wide value that a ``with`` block sets for its duration: the what-if change models load under
(:mod:`.what_if`), the log GE's calls are noted in (:mod:`.session_log`)."""

from __future__ import annotations

import contextlib
from typing import Generic, Iterator, TypeVar

T = TypeVar("T")


class Scoped(Generic[T]):
    """:attr:`value` is the one the innermost :meth:`set` block gave (``default`` outside every block)."""

    def __init__(self, default: T) -> None:
        self.value = default

    @contextlib.contextmanager
    def set(self, value: T) -> Iterator[T]:
        """``value`` for the block; the previous one back afterwards, whatever the block raised."""
        saved, self.value = self.value, value
        try:
            yield value
        finally:
            self.value = saved
