"""Checkpoints of a compiled training step: saved atomically, resumed exactly.

A checkpoint holds the step's parameters and optimizer state, its step
count and seed (which fix the hyper-parameter schedule and every per-worker
RNG stream), torch's host RNG state, and whatever the training loop adds
(its data position: epoch and batch). Rank 0 writes it (data-parallel
workers hold identical state), as ``step-00000120.kckpt`` in the checkpoint
directory, by writing a temporary file, fsyncing it, renaming it into place
and fsyncing the directory, so a crash at any moment leaves either the old
set of checkpoints or the new one, never a torn file. The temporary file
of a writer killed mid-save is removed by rank 0's next save or restore. A restarted job (a
rerun, or torchrun --max-restarts) loads the newest checkpoint that reads
back whole and carries on from the step after it.

The file is a header line naming the format, a line with the SHA-256 and
length of the payload, then the payload (torch.save's bytes). A payload
whose digest does not match (a flipped bit on disk or in transit) is
reported and skipped like a torn file: torch.load alone would read most
such damage back as different numbers, and the job would resume silently
from them. Files of the first format, which carry no digest, still load.
"""

import hashlib
import io
import os
import re
import socket
import sys
import time

import torch

from . import distributed

FORMAT = "kiln-checkpoint-2"
_UNCHECKED_FORMAT = "kiln-checkpoint-1"
_NAME = re.compile(r"^step-(\d{8,})\.kckpt$")
# A writer's temporary file: "<checkpoint>.tmp-<host>-<pid>". A name
# without a host is matched too; only its age can tell it is abandoned.
_TEMPORARY = re.compile(r"^step-\d{8,}\.kckpt\.tmp-(?:(?P<host>.+)-)?(?P<pid>\d+)$")
# A temporary file nobody has written to for this long is abandoned whoever
# wrote it: a live writer's file changes every few seconds until renamed.
ABANDONED_AFTER_SECONDS = 3600


class CorruptCheckpoint(ValueError):
    """A checkpoint file that must not be loaded: the message says why."""


def _header(body):
    """The lines a checkpoint file starts with, for payload bytes `body`."""
    return f"{FORMAT}\n{hashlib.sha256(body).hexdigest()} {len(body)}\n".encode("ascii")


def _decode(data):
    """The payload dict of a checkpoint file's bytes `data`; raises
    CorruptCheckpoint when its digest or framing is wrong."""
    magic = FORMAT.encode("ascii") + b"\n"
    if not data.startswith(magic):
        if data.startswith(b"PK"):  # torch.save's zip: the first format
            saved = torch.load(io.BytesIO(data))
            if not isinstance(saved, dict) or saved.get("format") != _UNCHECKED_FORMAT:
                raise CorruptCheckpoint(f"not a {FORMAT} or {_UNCHECKED_FORMAT} file")
            return saved
        raise CorruptCheckpoint(f"not a {FORMAT} file")
    end = data.find(b"\n", len(magic))
    fields = data[len(magic):end].decode("ascii", "replace").split() if end > 0 else []
    if len(fields) != 2 or len(fields[0]) != 64 or not fields[1].isdigit():
        raise CorruptCheckpoint("checksum mismatch (the digest line is damaged)")
    recorded, length = fields[0], int(fields[1])
    body = memoryview(data)[end + 1:]
    if len(body) != length:
        raise CorruptCheckpoint(f"checksum mismatch (the payload is {len(body)} bytes, "
                                f"the header records {length})")
    actual = hashlib.sha256(body).hexdigest()
    if actual != recorded:
        raise CorruptCheckpoint(f"checksum mismatch (the payload's SHA-256 is "
                                f"{actual[:16]}..., the header records {recorded[:16]}...)")
    saved = torch.load(io.BytesIO(body))
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise CorruptCheckpoint(f"not a {FORMAT} file")
    return saved


def _host():
    """This host's name in temporary files: KILN_HOST_ID (as the cache's
    leases use it), else the host name; only characters safe in a name."""
    name = os.environ.get("KILN_HOST_ID") or socket.gethostname() or "localhost"
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process, say: it exists
        return True
    return True


class Checkpointer:
    def __init__(self, directory, every, keep=3):
        """Checkpoints into `directory` every `every` steps, keeping the
        newest `keep` (older ones are removed after a newer one is safe)."""
        if every < 1:
            raise ValueError("checkpoint interval must be at least 1 step")
        self.directory = str(directory)
        self.every = int(every)
        self.keep = max(1, int(keep))
        os.makedirs(self.directory, exist_ok=True)

    def _checkpoints(self):
        found = []
        for name in os.listdir(self.directory):
            m = _NAME.match(name)
            if m:
                found.append((int(m.group(1)), os.path.join(self.directory, name)))
        return sorted(found)

    def _remove_abandoned(self):
        """Removes the temporary files of writers that died before renaming
        them (killed mid-save): those of this host whose process is gone,
        and any that nobody has written to for ABANDONED_AFTER_SECONDS (a
        writer on another host cannot be asked)."""
        host, now = _host(), time.time()
        for name in os.listdir(self.directory):
            m = _TEMPORARY.match(name)
            if not m:
                continue
            path = os.path.join(self.directory, name)
            try:
                idle = now - os.stat(path).st_mtime
                if ((m.group("host") == host and not _alive(int(m.group("pid"))))
                        or idle > ABANDONED_AFTER_SECONDS):
                    os.unlink(path)
                    print(f"kiln: removed the abandoned temporary checkpoint {path}",
                          file=sys.stderr)
            except OSError:
                pass  # gone already, or not ours to remove: it costs only space

    def latest(self):
        """The newest complete checkpoint as a dict, or None. A file that
        does not read back whole (truncated by a full disk, a flipped bit) is
        reported on stderr and skipped in favour of the one before it."""
        for step, path in reversed(self._checkpoints()):
            try:
                with open(path, "rb") as f:
                    return _decode(f.read())
            except Exception as error:  # corrupt: fall back, loudly
                why = " ".join(str(error).split())
                print(f"kiln: skipping checkpoint {path}: {why}", file=sys.stderr)
        return None

    def restore(self, compiled):
        """Loads the newest checkpoint into `compiled` (a CompiledStep) and
        the host RNG; returns the loop's extra state, or None to start fresh."""
        if distributed.world().rank == 0:
            self._remove_abandoned()
        saved = self.latest()
        if saved is None:
            return None
        compiled.load_checkpoint_state(saved["step"])
        torch.set_rng_state(saved["torch_rng"])
        return saved["extra"]

    def due(self, step_number):
        return step_number % self.every == 0

    def save(self, compiled, /, **extra):
        """Writes a checkpoint of `compiled` (a CompiledStep) with `extra`
        (the loop's data position, say). Rank 0 writes; other ranks return
        None at once. Returns the path written."""
        state = compiled.checkpoint_state()  # every rank: it may talk to the device
        if distributed.world().rank != 0:
            return None
        self._remove_abandoned()
        payload = {"format": FORMAT, "step": state, "torch_rng": torch.get_rng_state(),
                   "extra": extra}
        buffer = io.BytesIO()
        torch.save(payload, buffer)
        body = buffer.getbuffer()
        final = os.path.join(self.directory, f"step-{state['steps']:08d}.kckpt")
        temporary = f"{final}.tmp-{_host()}-{os.getpid()}"
        try:
            with open(temporary, "wb") as f:
                f.write(_header(body))
                f.write(body)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, final)
            fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as error:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise OSError(error.errno, f"cannot write checkpoint {final}: "
                          f"{error.strerror}") from error
        for _, old in self._checkpoints()[:-self.keep]:
            os.unlink(old)
        return final
