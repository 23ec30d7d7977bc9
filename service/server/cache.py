"""A bounded LRU of finished translations.

Real traffic repeats itself (UI strings, boilerplate, client retries), and a
decoded sentence is a pure function of the model, the normalised source and
the search options, so its finished `Search` can answer the next identical
request without touching the decode worker. Everything that changes the
answer is in the key; what is applied to the finished search (alignment kind,
unknown-word replacement, names kept, glossaries) is applied afterwards and is not.

Used on the event loop only (no locking).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Hashable

from attnmt.service.inference.search import Search
from attnmt.service.server.metrics import Metrics


class TranslationCache:
    def __init__(self, max_entries: int, metrics: Metrics, model: str):
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, Search] = OrderedDict()
        self._hits = metrics.cache_requests.labels(model, "hit")
        self._misses = metrics.cache_requests.labels(model, "miss")
        self._size = metrics.cache_entries.labels(model)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> Search | None:
        search = self._entries.get(key)
        if search is None:
            self._misses.inc()
            return None
        self._entries.move_to_end(key)
        self._hits.inc()
        return search

    def put(self, key: Hashable, search: Search) -> None:
        if not search.done or not search.finished:
            return
        self._entries[key] = search
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        self._size.set(len(self._entries))
