"""Checkpoints of a compiled training step: saved atomically, resumed exactly.

A checkpoint holds the step's parameters and optimizer state, its step
count and seed (which fix the hyper-parameter schedule and every per-worker
RNG stream), torch's host RNG state, and whatever the training loop adds
(its data position: epoch and batch). Rank 0 writes it (data-parallel
workers hold identical state), as ``step-00000120.kckpt`` in the checkpoint
directory, by writing a temporary file, fsyncing it, renaming it into place
and fsyncing the directory, so a crash at any moment leaves either the old
set of checkpoints or the new one, never a torn file. A restarted job (a
rerun, or torchrun --max-restarts) loads the newest checkpoint that reads
back whole and carries on from the step after it.
"""

import io
import os
import re
import sys

import torch

from . import distributed

FORMAT = "kiln-checkpoint-1"
_NAME = re.compile(r"^step-(\d{8,})\.kckpt$")


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

    def latest(self):
        """The newest complete checkpoint as a dict, or None. A file that
        does not read back (truncated by a full disk, say) is reported on
        stderr and skipped in favour of the one before it."""
        for step, path in reversed(self._checkpoints()):
            try:
                saved = torch.load(path)
                if saved.get("format") != FORMAT:
                    raise ValueError(f"not a {FORMAT} file")
                return saved
            except Exception as error:  # corrupt: fall back, loudly
                print(f"kiln: skipping unreadable checkpoint {path}: {error}",
                      file=sys.stderr)
        return None

    def restore(self, compiled):
        """Loads the newest checkpoint into `compiled` (a CompiledStep) and
        the host RNG; returns the loop's extra state, or None to start fresh."""
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
        payload = {"format": FORMAT, "step": state, "torch_rng": torch.get_rng_state(),
                   "extra": extra}
        buffer = io.BytesIO()
        torch.save(payload, buffer)
        final = os.path.join(self.directory, f"step-{state['steps']:08d}.kckpt")
        temporary = f"{final}.tmp-{os.getpid()}"
        try:
            with open(temporary, "wb") as f:
                f.write(buffer.getbuffer())
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
