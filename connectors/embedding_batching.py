"""Concurrent callers (chat workers) share one encoder call: :class:`BatchingEncoder` gathers requests that arrive
within a few milliseconds of one another and encodes them as one batch."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np

from connectors.embedding_backends import Encoder, Progress

_lock = threading.Lock()


class _Request:
    __slots__ = ("done", "error", "result", "texts")

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = texts
        self.result: np.ndarray | None = None
        self.error: BaseException | None = None
        self.done = False


class BatchingEncoder:
    """Encodes concurrent requests together: the first caller waits ``window_s`` for others (only when another
    thread asked very recently, so a lone caller never waits), then encodes every pending text in one call and
    hands each caller its rows. Callers arriving meanwhile form the next batch."""

    def __init__(self, encoder: Encoder, *, window_s: float = 0.004, max_texts: int = 256,
                 batch_size: int = 64) -> None:
        if window_s < 0:
            raise ValueError("window_s must be >= 0")
        self.encoder = encoder
        self.backend = encoder.backend
        self.one_text_a_run = encoder.one_text_a_run
        self.fingerprint = encoder.fingerprint
        self.window_s = window_s
        self.max_texts = max_texts
        self.batch_size = batch_size
        self._cv = threading.Condition()
        self._pending: list[_Request] = []
        self._busy = False
        self._last: tuple[int, float] = (0, 0.0)  # (thread id, time) of the latest request
        self.batches = 0  # how many encoder calls served how many requests: for tests and benchmarks
        self.requests = 0

    def encode(
        self, texts: Sequence[str], batch_size: int | None = None, on_progress: Progress | None = None
    ) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), np.float32)
        vecs = self._encode(texts)
        if on_progress is not None:
            on_progress(len(texts), len(texts))
        return vecs

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        req = _Request(texts)
        me = threading.get_ident()
        with self._cv:
            last_thread, last_at = self._last
            now = time.monotonic()
            crowded = bool(self._pending) or self._busy or (last_thread != me and now - last_at < 0.05)
            self._last = (me, now)
            self._pending.append(req)
        while True:
            with self._cv:
                while not req.done and self._busy:
                    self._cv.wait()
                if req.done:
                    return self._result(req)
                self._busy = True  # this caller leads the next batch
            try:
                if crowded and self.window_s:
                    time.sleep(self.window_s)
                with self._cv:
                    batch: list[_Request] = []
                    n = 0
                    while self._pending and (not batch or n + len(self._pending[0].texts) <= self.max_texts):
                        r = self._pending.pop(0)
                        batch.append(r)
                        n += len(r.texts)
                self._run(batch)
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()
            # more than max_texts were waiting ahead of this caller: its request is still pending; lead again

    def _run(self, batch: list[_Request]) -> None:
        texts = [t for r in batch for t in r.texts]
        try:
            vecs = self.encoder.encode(texts, self.batch_size)
        except BaseException as e:  # noqa: BLE001 - every caller of the batch sees the failure
            for r in batch:
                r.error, r.done = e, True
            return
        pos = 0
        for r in batch:
            r.result = vecs[pos:pos + len(r.texts)]
            pos += len(r.texts)
            r.done = True
        self.batches += 1
        self.requests += len(batch)

    @staticmethod
    def _result(req: _Request) -> np.ndarray:
        if req.error is not None:
            raise req.error
        assert req.result is not None
        return req.result


_batchers: dict[int, BatchingEncoder] = {}


def shared_batcher(encoder: Encoder, window_s: float) -> BatchingEncoder:
    """One batcher per encoder, so the query embedder and the answerer's sentences share batches."""
    with _lock:
        b = _batchers.get(id(encoder))
        if b is None or b.encoder is not encoder:
            b = BatchingEncoder(encoder, window_s=window_s)
            _batchers[id(encoder)] = b
        return b
