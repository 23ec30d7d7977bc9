"""handoff.LoopCalls: the decode workers' calls onto the event loop."""

import asyncio
import threading

import pytest

from attnmt.service.server.handoff import LoopCalls


def test_calls_from_many_threads_all_run_on_the_loop_in_each_threads_order():
    async def main():
        loop = asyncio.get_running_loop()
        calls = LoopCalls(loop)
        seen: list[tuple[int, int, bool]] = []
        done = asyncio.Event()
        total = 4 * 500

        def record(thread: int, i: int) -> None:
            seen.append((thread, i, threading.current_thread() is threading.main_thread()))
            if len(seen) == total:
                done.set()

        threads = [threading.Thread(target=lambda t=t: [calls.call(record, t, i) for i in range(500)])
                   for t in range(4)]
        for t in threads:
            t.start()
        await asyncio.wait_for(done.wait(), 10)
        for t in threads:
            t.join()
        calls.close()
        return seen

    seen = asyncio.run(main())
    assert all(on_loop for _, _, on_loop in seen)
    for t in range(4):
        assert [i for thread, i, _ in seen if thread == t] == list(range(500))


def test_close_runs_what_is_queued_and_later_calls_are_refused():
    async def main():
        calls = LoopCalls(asyncio.get_running_loop())
        ran = []
        worker = threading.Thread(target=lambda: [calls.call(ran.append, i) for i in range(3)])
        worker.start()
        worker.join()                          # queued, and the loop has not run since
        calls.close()
        assert ran == [0, 1, 2]
        with pytest.raises(RuntimeError):
            calls.call(ran.append, 3)
        calls.close()                          # twice is harmless
        return ran

    assert asyncio.run(main()) == [0, 1, 2]


def test_a_failing_call_is_logged_and_the_next_ones_still_run(caplog):
    async def main():
        calls = LoopCalls(asyncio.get_running_loop())
        ran = []
        calls.call(lambda: 1 / 0)
        calls.call(ran.append, "after")
        for _ in range(100):
            if ran:
                break
            await asyncio.sleep(0.01)
        calls.close()
        return ran

    assert asyncio.run(main()) == ["after"]
    assert "failed on the event loop" in caplog.text


def test_without_libc_symbols_the_wake_up_falls_back_to_os_write_and_a_full_pipe_is_no_error(monkeypatch):
    """Where the process's libc cannot be called through ctypes, the wake-up is os.write (which
    lets go of the GIL); on a full pipe, which holds a wake-up already, it writes nothing."""
    import ctypes
    import os

    from attnmt.service.server import handoff

    def no_symbols(name):
        raise OSError("no symbols")
    monkeypatch.setattr(ctypes, "PyDLL", no_symbols)
    wake = handoff._gil_holding_write()
    assert wake.__name__ == "fallback"
    read, write = os.pipe()
    try:
        os.set_blocking(write, False)
        wake(write)
        assert os.read(read, 16) == b"\0"
        while True:                                   # fill the pipe
            try:
                os.write(write, b"x" * 4096)
            except BlockingIOError:
                break
        wake(write)                                   # full: no exception
    finally:
        os.close(read)
        os.close(write)
