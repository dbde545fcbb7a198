"""Reading and writing bags in their own processes, so the estimator has a core to itself.

On a long bag, the replay's own work (reading and deserializing messages, building and
serializing the output messages) costs about as much as the estimator. With two cores,
:class:`ReaderProcess` reads and decodes the bag (sensor readings in batches; the ground truth
stays there until the end) and :class:`WriterProcess` builds and writes the output bag, while
the main process reorders, estimates and derives the forces. Both processes are started with
``spawn`` (safe after GTSAM's threads exist; a calling script needs the usual
``if __name__ == "__main__":`` guard) and load the mechanism from its config file; a process
takes 1-2 s of CPU to start (imports), which is why short bags are replayed in one process.

Errors in a process come back as one-line :class:`~mbfg_ros.errors.MbfgError` messages; on any
failure the other side is stopped and a partial output bag is removed.
"""
from __future__ import annotations

import multiprocessing as mp
import pickle
import queue
import shutil
import signal
import time
from pathlib import Path
from typing import Iterator

from mbfg_ros.errors import MbfgError
from mbfg_ros.termination import terminate_as_interrupt

BATCH = 256                 # records or estimates per message between processes
ROWS = 1024                 # keyframes (write_keyframes) per message to the writer
QUEUE_DEPTH = 64            # batches in flight (bounds memory; the fast side waits)
POLL = 0.5                  # s between checks that the other process is still alive


def _pack(item) -> bytes:
    """Pickled here, not in the queue's feeder thread (which would only print its errors)."""
    return pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)


def _context():
    return mp.get_context("spawn")


def _describe(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, MbfgError) else f"{type(exc).__name__}: {exc}"


def _end(proc) -> None:
    """Stop a process that did not exit: SIGTERM, then SIGKILL."""
    proc.terminate()
    proc.join(timeout=2.0)
    if proc.is_alive():
        proc.kill()
        proc.join()


# --------------------------------------------------------------------------------------------
# reading
def _read_worker(out: mp.Queue, bag: str, config: str, remap: dict, truth: bool) -> None:
    terminate_as_interrupt()
    try:
        from mbfg_ros.model.mechanism import load_mechanism
        from mbfg_ros.replay.bag_input import SENSOR, BagInput
        from mbfg_ros.replay.truth import TruthCollector

        mech = load_mechanism(config)
        inp = BagInput(bag, mech, remap, truth=truth)
        collector = TruthCollector(mech) if truth else None
        batch: list = []
        perf = time.perf_counter
        for kind, topic, log_ns, payload in inp.records():
            if kind == SENSOR:
                batch.append((topic, log_ns, payload))
                if len(batch) >= BATCH:
                    out.put(_pack(("batch", batch, inp.problems())))
                    batch = []
            else:
                t0 = perf()
                collector.add(topic, payload)
                inp.time_truth += perf() - t0
        if batch:
            out.put(_pack(("batch", batch, inp.problems())))
        out.put(_pack(("end", inp.state(), collector.state() if collector is not None else None,
                       time.process_time())))
    except KeyboardInterrupt:
        out.cancel_join_thread()           # nobody reads the queue any more: exit without waiting
    except BaseException as exc:          # noqa: BLE001 - reported to the main process
        out.put(_pack(("error", _describe(exc))))
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)     # the main process may terminate() us


class ReaderProcess:
    """``records()`` like :meth:`BagInput.records` (sensor records only), read in another
    process; at the end the main process's ``inp`` and ``collector`` get the reader's counts
    and the ground truth."""

    def __init__(self, inp, collector, config: str | Path) -> None:
        self.inp = inp
        self.collector = collector
        self.config = str(config)
        self.proc = None
        self.wait = 0.0            # s the main process waited for batches
        self.problems: dict = {}   # the reader's problem counts so far (as BagInput.problems)
        self.cpu = 0.0             # s of CPU the reader process used

    def records(self) -> Iterator[tuple[str, str, int, object]]:
        ctx = _context()
        q = ctx.Queue(maxsize=QUEUE_DEPTH)
        self.proc = ctx.Process(target=_read_worker, daemon=True,
                                args=(q, str(self.inp.path), self.config, dict(self.inp.remap),
                                      self.collector is not None))
        self.proc.start()
        perf = time.perf_counter
        try:
            while True:
                t0 = perf()
                try:
                    item = pickle.loads(q.get(timeout=POLL))
                except queue.Empty:
                    self.wait += perf() - t0
                    if not self.proc.is_alive():
                        raise MbfgError(f"the bag reader process stopped (exit code {self.proc.exitcode}) "
                                        f"while reading {str(self.inp.path)!r}") from None
                    continue
                self.wait += perf() - t0
                if item[0] == "batch":
                    self.problems = item[2]
                    for topic, log_ns, payload in item[1]:
                        yield "sensor", topic, log_ns, payload
                elif item[0] == "end":
                    self.inp.restore(item[1])
                    if self.collector is not None:
                        self.collector.restore(item[2])
                    self.cpu = item[3]
                    return
                else:
                    raise MbfgError(item[1])
        finally:
            self.close()

    def close(self) -> None:
        if self.proc is not None:
            self.proc.join(timeout=2.0)
            if self.proc.is_alive():
                _end(self.proc)
            self.proc = None


# --------------------------------------------------------------------------------------------
# writing
class _Abort(Exception):
    pass


def _write_worker(inbox: mp.Queue, results: mp.Queue, path: str, config: str, names, covariance: bool,
                  storage: str, overwrite: bool, custom_data: dict) -> None:
    terminate_as_interrupt()           # SIGTERM to the process group: abort and remove, like Ctrl-C
    try:
        from mbfg_ros.io import messages as msgs
        from mbfg_ros.io.estimate_messages import DIAGNOSTIC_ARRAY
        from mbfg_ros.model.mechanism import load_mechanism
        from mbfg_ros.replay.output_bag import OutputBag

        mech = load_mechanism(config)
        store = msgs.typestore()
        busy = 0.0
        with OutputBag(path, mech, names, covariance=covariance, storage=storage, overwrite=overwrite,
                       custom_data=custom_data) as out:
            while True:
                item = inbox.get()
                if item is None:
                    break
                if item == "abort":
                    raise _Abort()
                t0 = time.perf_counter()
                item = pickle.loads(item)
                for rec in item:
                    if rec[0] == "e":
                        out.write_estimate(rec[1], rec[2], rec[3])
                    elif rec[0] == "k":
                        out.write_keyframes(rec[1], rec[2])
                    else:
                        out.write_diagnostics(store.deserialize_cdr(rec[1], DIAGNOSTIC_ARRAY), rec[2])
                busy += time.perf_counter() - t0
        results.put(("done", out.summary(), (busy, time.process_time())))
    except (_Abort, KeyboardInterrupt):
        results.put(("aborted", None, (0.0, 0.0)))
    except BaseException as exc:          # noqa: BLE001 - reported to the main process
        results.put(("error", _describe(exc), (0.0, 0.0)))
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)     # the main process may terminate() us


class WriterProcess:
    """An :class:`~mbfg_ros.replay.output_bag.OutputBag` written by another process (same
    interface: a context manager with ``write_estimate``, ``write_keyframes``, ``write_diagnostics``,
    ``summary``)."""

    def __init__(self, path: str | Path, config: str | Path, names, *, covariance: bool = False,
                 storage: str = "mcap", overwrite: bool = False, custom_data: dict | None = None) -> None:
        from mbfg_ros.io.bag_writer import check_output_path
        self.path = check_output_path(path, overwrite)
        self.args = (str(self.path), str(config), names, covariance, storage, overwrite, dict(custom_data or {}))
        self.proc = None
        self._batch: list = []
        self._rows = 0             # keyframes of write_keyframes in _batch
        self._summary: dict | None = None
        self.busy = 0.0            # s the writer process spent writing
        self.wait = 0.0            # s the main process waited for it to finish at the end
        self.cpu = 0.0             # s of CPU the writer process used

    def __enter__(self) -> "WriterProcess":
        ctx = _context()
        self.inbox = ctx.Queue(maxsize=QUEUE_DEPTH)
        self.results = ctx.Queue()
        self.proc = ctx.Process(target=_write_worker, args=(self.inbox, self.results, *self.args), daemon=True)
        self.proc.start()
        return self

    def _check(self) -> None:
        try:
            status, info, _ = self.results.get_nowait()
        except queue.Empty:
            if not self.proc.is_alive():
                raise MbfgError(f"the output bag writer stopped (exit code {self.proc.exitcode}) "
                                f"writing {str(self.path)!r}") from None
            return
        raise MbfgError(info if status == "error" else f"the output bag writer stopped early ({status})")

    def _put(self, item) -> None:
        while True:
            try:
                self.inbox.put(item, timeout=POLL)
                return
            except queue.Full:
                self._check()

    def _flush(self) -> None:
        if self._batch:
            self._check()
            self._put(_pack(self._batch))
            self._batch = []
            self._rows = 0

    def write_estimate(self, e, forces, stamp_ns: int) -> None:
        self._batch.append(("e", e, forces, stamp_ns))
        if len(self._batch) >= BATCH:
            self._flush()

    def write_keyframes(self, stamps_ns, arrays) -> None:
        """As :meth:`OutputBag.write_keyframes`: the arrays travel (pickled as they are), the
        messages are serialised and written in the writer process."""
        self._batch.append(("k", stamps_ns, arrays))
        self._rows += len(stamps_ns)
        if self._rows >= ROWS or len(self._batch) >= BATCH:
            self._flush()

    def write_diagnostics(self, msg, stamp_ns: int) -> None:
        from mbfg_ros.io import messages as msgs
        self._batch.append(("d", bytes(msgs.serialize(msg)), stamp_ns))

    def __exit__(self, exc_type, exc, tb) -> bool:
        t0 = time.perf_counter()
        try:
            if exc_type is None:
                self._flush()
                self._put(None)
                while True:
                    try:
                        status, info, busy = self.results.get(timeout=POLL)
                        break
                    except queue.Empty:
                        if not self.proc.is_alive():
                            raise MbfgError(f"the output bag writer stopped (exit code {self.proc.exitcode}) "
                                            f"writing {str(self.path)!r}") from None
                if status != "done":
                    raise MbfgError(info)
                self._summary, (self.busy, self.cpu) = info, busy
            else:
                try:
                    self.inbox.put("abort", timeout=POLL)
                except queue.Full:
                    pass
        except BaseException:
            self._stop()
            shutil.rmtree(self.path, ignore_errors=True)
            raise
        finally:
            self.wait += time.perf_counter() - t0
        self._stop()
        if exc_type is not None:
            shutil.rmtree(self.path, ignore_errors=True)
        return False

    def _stop(self) -> None:
        if self.proc is not None:
            self.proc.join(timeout=5.0)
            if self.proc.is_alive():
                _end(self.proc)
            self.proc = None

    def summary(self) -> dict:
        return self._summary or {}
