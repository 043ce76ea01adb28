"""Training metrics: a console line on rank 0 and TensorBoard event files.

Each step records the loss, samples/s (wall clock, this machine), and the
simulated NeuronCore's modelled step time and MFU, which say what the step
would take on the target. Rank 0 prints them every ``print_every`` steps and
writes every step to ``<logdir>/events.out.tfevents.<time>.<host>.kiln``,
which TensorBoard (``tensorboard --logdir``) reads: a TFRecord file of
``tensorflow.Event`` protos holding scalar summaries. The record framing
(length, masked CRC-32C of the length, data, masked CRC-32C of the data) is
written here; the protos come from tensorboard_event.proto.
"""

import os
import socket
import struct
import sys
import time

from . import distributed
from . import tensorboard_event_pb2 as tb


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for byte in data:
        c = _TABLE[(c ^ byte) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


class EventFile:
    """Appends TensorBoard events (scalars) to one event file."""

    def __init__(self, logdir):
        os.makedirs(logdir, exist_ok=True)
        self.path = os.path.join(
            logdir, f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.kiln")
        self._file = open(self.path, "ab")
        self._write(tb.Event(wall_time=time.time(), file_version="brain.Event:2"))

    def _write(self, event):
        data = event.SerializeToString()
        header = struct.pack("<Q", len(data))
        self._file.write(header + struct.pack("<I", _masked(crc32c(header))) +
                         data + struct.pack("<I", _masked(crc32c(data))))

    def scalars(self, step, values):
        summary = tb.Summary(value=[tb.Summary.Value(tag=k, simple_value=float(v))
                                    for k, v in values.items()])
        self._write(tb.Event(wall_time=time.time(), step=int(step), summary=summary))

    def flush(self):
        self._file.flush()

    def close(self):
        self._file.close()


def read_events(path):
    """(step, {tag: value}) for every scalar event of an event file; checks
    every CRC (what TensorBoard's reader does)."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        body = data[pos + 12:pos + 12 + length]
        (body_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        if header_crc != _masked(crc32c(header)) or body_crc != _masked(crc32c(body)):
            raise ValueError(f"{path}: bad CRC in the record at byte {pos}")
        event = tb.Event.FromString(body)
        if event.HasField("summary"):
            out.append((event.step, {v.tag: v.simple_value for v in event.summary.value}))
        pos += 16 + length
    return out


class Metrics:
    """Per-step figures for a training loop (rank 0 prints and writes)."""

    def __init__(self, logdir=None, print_every=10, samples_per_step=None, out=sys.stdout):
        self.rank = distributed.world().rank
        self.print_every = max(1, int(print_every))
        self.samples_per_step = samples_per_step
        self.out = out
        self.events = EventFile(logdir) if logdir and self.rank == 0 else None
        self._last = None
        self.history = []

    def step(self, step_number, loss, stats, samples=None):
        """Records step `step_number`: `loss` (float) and the CompiledStep's
        last_stats; `samples` is the global batch size."""
        now = time.perf_counter()
        samples = samples or self.samples_per_step or 0
        rate = samples / (now - self._last) if self._last and samples else 0.0
        self._last = now
        stats = stats or {}
        figures = {"loss": float(loss), "samples_per_sec": rate,
                   "modelled_step_ms": 1e3 * stats.get("modelled_seconds", 0.0),
                   "mfu": stats.get("mfu", 0.0)}
        self.history.append((step_number, figures))
        if self.rank != 0:
            return figures
        if self.events:
            self.events.scalars(step_number, figures)
        if step_number % self.print_every == 0:
            print(f"step {step_number:6d}  loss {figures['loss']:.4f}  "
                  f"{rate:8.1f} samples/s  modelled {figures['modelled_step_ms']:.3f} ms"
                  f"  MFU {100 * figures['mfu']:.2f}%", file=self.out, flush=True)
            if self.events:
                self.events.flush()
        return figures

    def close(self):
        if self.events:
            self.events.close()
