"""A forward run in steps: a worker thread used as a coroutine (for the layer-by-layer pass).

:func:`bnstudy.networks.layer_stats.layer_by_layer` suspends every chunk's forward at each
listed module until all chunks have reached it. A Python forward cannot be paused in the middle
(the model's ``forward``, hooks and all, is ordinary code with its own stack), so each chunk's
forward runs in a thread of its own that hands control back and forth with the caller through
two semaphores: exactly one of them runs at a time, and the caller decides which. The worker
inherits the caller's grad mode, autocast state and CUDA stream (thread-local in torch).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import torch

END = -1  # the stop of a chunk whose forward has returned (or was unwound)


class Unwind(BaseException):
    """Abandons a forward where it stands: raised in a hook, caught by whoever ran the forward.
    Not an ``Exception``, so no ``except Exception`` in a model swallows it."""


def caller_context(device: torch.device) -> Callable[[], contextlib.ExitStack]:
    """The thread-local state a worker's forward must share with the caller's."""
    grad, kind = torch.is_grad_enabled(), device.type
    autocast = torch.is_autocast_enabled(kind)
    dtype = torch.get_autocast_dtype(kind)
    stream = torch.cuda.current_stream(device) if kind == "cuda" else None

    def enter() -> contextlib.ExitStack:
        stack = contextlib.ExitStack()
        stack.enter_context(torch.set_grad_enabled(grad))
        if autocast:
            stack.enter_context(torch.autocast(kind, dtype=dtype))
        if stream is not None:  # also makes the stream's device the current one
            stack.enter_context(torch.cuda.stream(stream))
        return stack

    return enter


class Suspended(threading.Thread):
    """One forward, run in steps: each :meth:`step` runs it to its next :meth:`wait` (or its
    end); :meth:`unwind` abandons it. An error in the forward is raised by :meth:`step`, in the
    caller's thread; :class:`Unwind` raised in the forward ends it quietly."""

    def __init__(self, forward: Callable[[], object], context):
        super().__init__(daemon=True)
        self.forward, self.context = forward, context
        self.go, self.back = threading.Semaphore(0), threading.Semaphore(0)
        self.at, self.error, self.abort = None, None, False

    def run(self) -> None:
        self.go.acquire()
        try:
            if not self.abort:
                with self.context():
                    self.forward()
        except Unwind:
            pass
        except BaseException as e:  # handed to the caller's thread by step()
            self.error = e
        self.at = END
        self.back.release()

    def wait(self, j: int) -> None:
        """In this forward's thread, at stop ``j``: hand control back until resumed."""
        self.at = j
        self.back.release()
        self.go.acquire()
        if self.abort:
            raise Unwind

    def step(self) -> None:
        self.go.release()
        self.back.acquire()
        if self.error is not None:
            raise self.error

    def unwind(self) -> None:
        """Abandon the forward (unwinding its stack, freeing what it holds) and join the thread."""
        if self.is_alive():
            self.abort = True
            self.go.release()
        self.join()
