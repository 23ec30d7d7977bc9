"""Which waiting sentences join the next decoder step: fair between clients,
interactive before bulk.

Strict FIFO lets one client's 64-sentence, beam-16 request hold 1,024 rows
ahead of everyone, and lets a client that splits its work into many requests
take a larger share. Here each client (an mTLS identity, an `x-client-id`
metadata value, or else its address) has its own queue, and clients are
served by deficit round robin (Shreedhar & Varghese, 1995) weighted by cost =
rows x source tokens, the work a sentence adds to every step: each visit adds
`quantum` to a client's deficit and admits its sentences while their cost fits
the deficit and the step's budgets. Interactive work (Translate, Align) is
admitted before bulk work (TranslateStream) whenever both wait.

A sentence that does not fit the step's row or token budget waits without
blocking the other clients' sentences behind it (no head-of-line blocking
across clients; within a client, order is kept).
"""

from __future__ import annotations

import collections
from typing import Callable, Iterator

INTERACTIVE, BULK = 0, 1


class FairQueue:
    def __init__(self, quantum: int = 2048):
        self.quantum = quantum
        # priority -> client -> that client's waiting jobs, in arrival order;
        # the OrderedDict's order is the round-robin order
        self._clients: list[collections.OrderedDict[str, collections.deque]] = \
            [collections.OrderedDict(), collections.OrderedDict()]
        self._deficit: dict[tuple[int, str], float] = {}
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator:
        for clients in self._clients:
            for queue in clients.values():
                yield from queue

    def has(self, priority: int) -> bool:
        """Whether any job of this priority waits."""
        return bool(self._clients[priority])

    def append(self, job) -> None:
        clients = self._clients[job.priority]
        clients.setdefault(job.client, collections.deque()).append(job)
        self._n += 1

    def remove(self, dead: Callable[[object], bool]) -> list:
        """Take out every job for which `dead(job)` holds."""
        removed = []
        for clients in self._clients:
            for client in list(clients):
                queue = clients[client]
                keep = collections.deque(j for j in queue if not dead(j))
                removed += [j for j in queue if dead(j)]
                self._set(clients, client, keep)
        self._n -= len(removed)
        return removed

    def clear(self) -> None:
        for clients in self._clients:
            clients.clear()
        self._deficit.clear()
        self._n = 0

    def take(self, cost: Callable[[object], int], fits: Callable[[object], bool],
             admit: Callable[[object], None]) -> int:
        """Admit jobs by deficit round robin while `fits(job)` (the step's budgets, which
        `admit` updates); returns how many joined."""
        joined = 0
        for priority, clients in enumerate(self._clients):
            while clients:
                visited = False
                for client in list(clients):
                    queue, key = clients[client], (priority, client)
                    if not fits(queue[0]):
                        continue                      # the step cannot take its next sentence: no turn
                    visited = True
                    self._deficit[key] = self._deficit.get(key, 0.0) + self.quantum
                    while queue and fits(queue[0]) and cost(queue[0]) <= self._deficit[key]:
                        job = queue.popleft()
                        self._deficit[key] -= cost(job)
                        admit(job)
                        joined += 1
                    if queue:
                        clients.move_to_end(client)   # had its turn: the others go first next time
                    else:
                        self._set(clients, client, queue)
                if not visited:
                    break                             # nothing waiting fits this step any more
            if clients:
                break                                 # interactive work still waits: no bulk this step
        self._n -= joined
        return joined

    def _set(self, clients: collections.OrderedDict, client: str, queue: collections.deque) -> None:
        if queue:
            clients[client] = queue
        else:
            clients.pop(client, None)
            for priority in (INTERACTIVE, BULK):
                if clients is self._clients[priority]:
                    self._deficit.pop((priority, client), None)
