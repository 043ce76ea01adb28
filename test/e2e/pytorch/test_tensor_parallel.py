"""Tensor parallelism end to end: a Llama-style model (models.LlamaLM)
sharded by kiln.parallel over tensor-parallel groups of torchrun workers,
composed with data parallelism, ZeRO-1 and clipping, against eager PyTorch
training the whole model on the whole batch; per-shard dropout masks;
checkpoints across layouts; precompile; and an artifact run in the wrong
layout."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from test_distributed import KILN, free_port, load

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "train_tp.py")

import kiln  # noqa: E402  (PYTHONPATH is set by ctest)
from models import LlamaLM, llama_tp_plan  # noqa: E402

TOLERANCE = 1e-5  # relative, f32


class TensorParallelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()
        cls.env = dict(os.environ, KILN_CACHE_URL=os.path.join(cls.dir, "cache"),
                       KILN_COMM_TIMEOUT="60",
                       PYTHONPATH=os.pathsep.join([HERE] + sys.path))
        for name in ("KILN_EXTRACT_GRAPHS_ONLY", "RANK", "WORLD_SIZE", "MASTER_ADDR",
                     "MASTER_PORT", "KILN_RENDEZVOUS", "KILN_TENSOR_PARALLEL"):
            cls.env.pop(name, None)
        eager = cls.run_worker(None, "eager.json", "--eager", "--clip", "0.5")
        cls.eager, cls.eager_norms = eager["losses"], eager["grad_norms"]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)

    @classmethod
    def run_worker(cls, nproc, out, *args, env=None, prefix=()):
        path = os.path.join(cls.dir, out)
        command = [sys.executable, WORKER] if nproc is None else [
            sys.executable, "-m", "kiln.torchrun", "--nproc_per_node", str(nproc),
            "--master_port", str(free_port()), WORKER]
        result = subprocess.run([*prefix, *command, "--out", path, *args],
                                env=env or cls.env, cwd=HERE, capture_output=True,
                                text=True, timeout=600)
        if result.returncode != 0:
            raise AssertionError(f"{' '.join(command)} {' '.join(args)} failed "
                                 f"({result.returncode}):\n{result.stdout[-3000:]}"
                                 f"{result.stderr[-3000:]}")
        return load(path) if os.path.exists(path) else None

    def assert_matches(self, losses, reference):
        self.assertEqual(len(losses), len(reference))
        for step, (got, want) in enumerate(zip(losses, reference), 1):
            self.assertLess(abs(got - want) / abs(want), TOLERANCE,
                            f"step {step}: {got} against eager {want}")

    def test_tp2_dp2_with_zero1_and_clipping_matches_one_worker(self):
        run = self.run_worker(4, "tp2dp2.json", "--tp", "2", "--zero-stage", "1",
                              "--clip", "0.5")
        self.assert_matches(run["losses"], self.eager)
        # The clipping norm is the whole model's: every shard's squares
        # and the replicated parameters' once.
        self.assert_matches(run["grad_norms"], self.eager_norms)
        # The checkpoint-ready state is whole: the vocabulary-parallel head
        # gathered to the whole vocabulary.
        self.assertEqual(run["shapes"]["head.weight"], [64, 32])
        self.assertEqual(run["shapes"]["layers.0.down.weight.exp_avg"], [32, 48])

    def test_gradient_accumulation_and_auto_cast_compose(self):
        eager = self.run_worker(None, "eager-accumulate.json", "--eager", "--clip", "0.5",
                                "--accumulate", "2", "--updates", "6")
        run = self.run_worker(4, "tp2dp2-accumulate.json", "--tp", "2", "--zero-stage", "1",
                              "--clip", "0.5", "--accumulate", "2", "--updates", "6")
        self.assert_matches(run["losses"], eager["losses"])
        # Mixed precision: bf16 matmul inputs, within the auto-cast
        # tolerance of the f32 run (docs/pytorch.md, "Numerics").
        env = dict(self.env, KILN_CC_FLAGS="--auto-cast=bf16")
        mixed = self.run_worker(4, "tp2dp2-bf16.json", "--tp", "2", "--zero-stage", "1",
                                "--clip", "0.5", "--accumulate", "2", "--updates", "6",
                                env=env)
        for got, want in zip(mixed["losses"], eager["losses"]):
            self.assertLess(abs(got - want) / want, 2e-2)

    def test_tp4_with_activation_checkpointing_matches_one_worker(self):
        # Each layer recomputed for the backward pass, its tensor-parallel
        # all-reduces with it.
        run = self.run_worker(4, "tp4.json", "--tp", "4", "--clip", "0.5",
                              "--activation-checkpointing")
        self.assert_matches(run["losses"], self.eager)
        self.assert_matches(run["grad_norms"], self.eager_norms)

    def test_key_value_heads_fewer_than_the_group_are_replicated(self):
        # 2 key-value heads at TP=4: each worker computes the head its
        # query heads read from the whole replicated weight, whose
        # gradient the clipping norm counts once.
        eager = self.run_worker(None, "eager-kv2.json", "--eager", "--clip", "0.5",
                                "--kv-heads", "2", "--updates", "8")
        run = self.run_worker(4, "tp4-kv2.json", "--tp", "4", "--clip", "0.5",
                              "--kv-heads", "2", "--updates", "8")
        self.assert_matches(run["losses"], eager["losses"])
        self.assert_matches(run["grad_norms"], eager["grad_norms"])
        # The checkpoint-ready state holds the replicated weight once, whole.
        self.assertEqual(run["shapes"]["layers.0.attn.k.weight"], [16, 32])

    def test_dropout_of_split_activations_draws_per_shard_masks(self):
        # The attention's probabilities, split by heads, draw each shard's
        # own masks; the residual branches, alike on both workers, draw
        # one mask. Eager PyTorch with those masks is the reference.
        eager = self.run_worker(None, "eager-dropout.json", "--eager", "--dropout", "0.1",
                                "--shards", "2", "--updates", "6")
        run = self.run_worker(2, "tp2-dropout.json", "--tp", "2", "--dropout", "0.1",
                              "--updates", "6")
        self.assert_matches(run["losses"], eager["losses"])
        # Other masks are another training, which the comparison tells apart.
        other = self.run_worker(None, "eager-dropout-whole.json", "--eager", "--dropout",
                                "0.1", "--updates", "6")
        self.assertGreater(max(abs(a - b) / b for a, b in zip(other["losses"], run["losses"])),
                           10 * TOLERANCE)

    def test_values_that_differ_across_the_group(self):
        def step(weight, x):
            split = x @ weight  # the weight is a shard
            reduced = torch.ops.kiln.all_reduce(split, "tensor")
            return (F.dropout(split, 0.1), F.dropout(reduced, 0.1),
                    torch.zeros_like(split) + x, torch.ops.kiln.worker_shard(x, "tensor", 2))
        gm = make_fx(step)(torch.randn(4, 4), torch.randn(4, 4))
        varying = {n.name for n in kiln.parallel.varying_across_group(gm, [0])}
        masks = [n.args[0].name for n in gm.graph.nodes if "bernoulli" in str(n.target)]
        self.assertIn(masks[0], varying)
        self.assertNotIn(masks[1], varying)
        self.assertIn("worker_shard", varying)
        self.assertNotIn("add", varying)  # zeros_like takes only the shape

    def test_checkpoint_resumes_in_another_layout(self):
        checkpoint = os.path.join(self.dir, "tp2dp2.ckpt")
        self.run_worker(4, "saved.json", "--tp", "2", "--clip", "0.5", "--updates", "10",
                        "--save-at", "10", "--checkpoint", checkpoint)
        saved = torch.load(checkpoint)
        self.assertEqual(list(saved["state"]["tokens.weight"].shape), [64, 32])
        resumed = self.run_worker(4, "resumed.json", "--tp", "1", "--clip", "0.5",
                                  "--updates", "10", "--resume", checkpoint)
        self.assert_matches(resumed["losses"], self.eager[10:])

    def test_precompiled_job_compiles_nothing(self):
        env = dict(self.env, KILN_CACHE_URL=os.path.join(self.dir, "precompiled"))
        report = os.path.join(self.dir, "report.json")
        out = subprocess.run(
            [KILN, "precompile", "--no-progress", "--report", report, "--",
             sys.executable, "-m", "kiln.torchrun", "--nproc_per_node", "4",
             "--master_port", str(free_port()), WORKER, "--tp", "2", "--updates", "2",
             "--out", os.path.join(self.dir, "collect.json")],
            env=env, cwd=HERE, capture_output=True, text=True, timeout=600)
        self.assertEqual(out.returncode, 0, out.stdout[-3000:] + out.stderr[-3000:])
        # Four ranks, one graph: the shards of a group have one shape and
        # the rank picks its vocabulary block when the step runs.
        self.assertEqual(len(load(report)["graphs"]), 1)
        run = self.run_worker(4, "after.json", "--tp", "2", "--updates", "2", env=env)
        self.assertEqual(run["compiles"], 0)

    def test_artifact_of_another_layout_is_refused(self):
        torch.manual_seed(0)
        model = kiln.parallel.parallelize(
            LlamaLM(vocab=64, hidden=32, heads=4, kv_heads=4, ffn=48, layers=1, seq=12),
            llama_tp_plan())
        step = kiln.compile_step(model, lambda logits, t: kiln.parallel.parallel_cross_entropy(
            logits.reshape(-1, 64), t.reshape(-1)), kiln.optim.SGD(lr=0.1),
            flags=["--tensor-parallel=2"], cache_root=os.path.join(self.dir, "refused"))
        ids = torch.randint(0, 64, (2, 12))
        with self.assertRaises(kiln.KilnError) as caught:
            step(ids, ids)
        message = str(caught.exception)
        self.assertNotIn("\n", message)
        self.assertIn("the artifact was compiled for a job of 1 data-parallel x 2 "
                      "tensor-parallel workers, but this job is laid out as 1 x 1",
                      message)

    def test_sharded_layers_in_one_worker_match_eager(self):
        # The vocabulary block's start is a rank-0 value between the
        # logits' row chain and the head's matmul epilogue (the tile
        # planner read the last dimension of its empty shape).
        def make():
            torch.manual_seed(3)
            return LlamaLM(vocab=64, hidden=64, heads=4, kv_heads=4, ffn=96, layers=1,
                           seq=32)
        ids = torch.randint(0, 64, (2, 33), generator=torch.Generator().manual_seed(5))
        x, y = ids[:, :-1], ids[:, 1:]
        eager = make()
        optimizer = torch.optim.AdamW(eager.parameters(), lr=1e-2)
        want = []
        for _ in range(3):
            loss = torch.nn.functional.cross_entropy(eager(x).reshape(-1, 64), y.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(eager.parameters(), 1.0)
            optimizer.step()
            want.append(float(loss))
        model = kiln.parallel.parallelize(make(), llama_tp_plan())
        step = kiln.compile_step(model, lambda logits, t: kiln.parallel.parallel_cross_entropy(
            logits.reshape(-1, 64), t.reshape(-1)), kiln.optim.AdamW(lr=1e-2),
            max_grad_norm=1.0, cache_root=os.path.join(self.dir, "alone"))
        self.assert_matches([float(step(x, y)) for _ in range(3)], want)

    def test_plans_that_match_nothing_are_refused(self):
        with self.assertRaisesRegex(ValueError, "'layers.*.attn.query' matches no module"):
            kiln.parallel.parallelize(LlamaLM(vocab=64, hidden=32, heads=4, kv_heads=4,
                                              ffn=48, layers=1),
                                      {"layers.*.attn.query": "column"})


if __name__ == "__main__":
    unittest.main()
