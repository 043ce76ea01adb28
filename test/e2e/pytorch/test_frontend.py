"""What a user of kiln.compile_step relies on besides the numbers: errors
that name the op and the model line, keys that do not depend on the
process, collection mode, new batch shapes, resident parameters."""

import copy
import os
import subprocess
import sys
import tempfile
import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F

import kiln
import models

HERE = os.path.dirname(os.path.abspath(__file__))

KEY_SCRIPT = """
import torch, torch.nn.functional as F, kiln, models
torch.manual_seed(int(__import__('sys').argv[1]))
model = models.BertClassifier()
step = kiln.compile_step(model, F.cross_entropy, kiln.optim.AdamW(lr=1e-3))
graph = step.graph(torch.zeros(4, 16, dtype=torch.long), torch.zeros(4, dtype=torch.long))
print(kiln.derive_key(graph.SerializeToString()))
"""


UNCACHED_SCRIPT = """
import torch, torch.nn.functional as F, kiln, models
torch.manual_seed(0)
for hidden in (32, 24):  # two graphs: the warning is said once a process
    step = kiln.compile_step(models.MLP(16, hidden, 4), F.cross_entropy, kiln.optim.SGD(lr=0.1))
    loss = float(step(torch.randn(8, 16), torch.randint(0, 4, (8,))))
    assert 0.5 < loss < 5, loss
    print(step.outcomes[step.key])
"""


def eager_step(torch_opt, reference, x, y):
    """One eager PyTorch training step of `reference`; returns its loss."""
    torch_opt.zero_grad()
    loss = F.cross_entropy(reference(x), y)
    loss.backward()
    torch_opt.step()
    return float(loss)


class CumsumModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(x).cumsum(dim=1)  # the unsupported line


class FrontEndTest(unittest.TestCase):
    def setUp(self):
        self.cache = tempfile.TemporaryDirectory()
        os.environ["KILN_CACHE_URL"] = self.cache.name
        os.environ.pop("KILN_EXTRACT_GRAPHS_ONLY", None)
        torch.manual_seed(0)

    def tearDown(self):
        self.cache.cleanup()

    def test_unsupported_op_names_op_and_line(self):
        step = kiln.compile_step(CumsumModel(), F.cross_entropy, kiln.optim.SGD(lr=0.1))
        with self.assertRaises(kiln.UnsupportedOpError) as caught:
            step(torch.randn(2, 8), torch.tensor([0, 1]))
        message = str(caught.exception)
        self.assertIn("aten.cumsum", message)
        self.assertIn("test_frontend.py", message)
        self.assertIn("in forward", message)

    def test_same_key_in_two_processes(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        keys = set()
        # Different seeds: initial weights are inputs, not part of the key.
        for seed in ("1", "2"):
            out = subprocess.run([sys.executable, "-c", KEY_SCRIPT, seed], cwd=HERE,
                                 env=env, capture_output=True, text=True, check=True)
            keys.add(out.stdout.strip())
        self.assertEqual(len(keys), 1, keys)
        self.assertRegex(keys.pop(), "^[0-9a-f]{64}$")

    def test_collection_mode_records_and_returns_zeros(self):
        graphs = tempfile.mkdtemp(dir=self.cache.name)
        os.environ["KILN_EXTRACT_GRAPHS_ONLY"] = "1"
        os.environ["KILN_GRAPHS_DIR"] = graphs
        try:
            step = kiln.compile_step(models.MLP(16, 32, 4), F.cross_entropy,
                                     kiln.optim.SGD(lr=0.1))
            loss = step(torch.randn(8, 16), torch.randint(0, 4, (8,)))
            self.assertEqual(float(loss), 0.0)
            self.assertEqual(step.outcomes, {step.key: "collected"})
            self.assertEqual(step.cache_stats()["compiles"], 0)
            files = sorted(os.listdir(graphs))
            self.assertEqual(files, [step.key + ".flags", step.key + ".kgraph.pb"])
        finally:
            del os.environ["KILN_EXTRACT_GRAPHS_ONLY"]
            del os.environ["KILN_GRAPHS_DIR"]

    def test_new_batch_shape_carries_parameters_over(self):
        model = models.MLP(16, 32, 4)
        reference = models.MLP(16, 32, 4)
        reference.load_state_dict(model.state_dict())
        opt = kiln.optim.SGD(lr=0.1, momentum=0.9)
        step = kiln.compile_step(model, F.cross_entropy, opt)
        torch_opt = kiln.optim.torch_optimizer(opt, reference.parameters())
        for n in (8, 8, 5, 8):
            x, y = torch.randn(n, 16), torch.randint(0, 4, (n,))
            got = float(step(x, y))
            loss = eager_step(torch_opt, reference, x, y)
            self.assertAlmostEqual(got, loss, delta=1e-4 * loss)
        self.assertEqual(len(step.keys), 2)
        step.copy_to(model)
        for (name, a), b in zip(model.named_parameters(), reference.parameters()):
            self.assertTrue(torch.allclose(a, b, atol=1e-5), name)

    def test_wrong_batch_dtype_is_a_clear_error(self):
        step = kiln.compile_step(models.MLP(16, 32, 4), F.cross_entropy, kiln.optim.SGD(lr=0.1))
        step(torch.randn(8, 16), torch.randint(0, 4, (8,)))
        with self.assertRaises(Exception) as caught:
            step(torch.randn(8, 16, dtype=torch.float64), torch.randint(0, 4, (8,)))
        self.assertIn("float64", str(caught.exception))

    def test_token_id_out_of_range_is_a_clear_error(self):
        # The embedding's gather DMA checks every index: the step fails
        # naming the token's partition and id, not a silent zero row.
        step = kiln.compile_step(models.BertClassifier(), F.cross_entropy,
                                 kiln.optim.AdamW(lr=1e-3))
        x = torch.randint(0, 10, (4, 16))
        y = torch.zeros(4, dtype=torch.long)
        step(x, y)
        x[2, 5] = 100000
        with self.assertRaises(kiln.KilnError) as caught:
            step(x, y)
        self.assertIn("dma_gather", str(caught.exception))
        self.assertIn("partition 37 reads index 100000, outside [0, 100)",
                      str(caught.exception))

    def test_class_label_out_of_range_is_a_clear_error(self):
        # cross_entropy looks each label up with a gather DMA: a label
        # outside the 4 classes stops the step naming it and its row, as
        # eager PyTorch raises IndexError, instead of a finite loss. The
        # lookup comes before any update, so the parameters stay as the
        # first step left them.
        torch.manual_seed(0)
        model = models.MLP(16, 32, 4)
        reference = copy.deepcopy(model)
        step = kiln.compile_step(model, F.cross_entropy, kiln.optim.SGD(lr=0.1))
        x, y = torch.randn(8, 16), torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
        step(x, y)
        for label in (4, -1, 1000):
            bad = y.clone()
            bad[4] = label
            with self.subTest(label=label):
                with self.assertRaises(IndexError):
                    F.cross_entropy(reference(x), bad)
                with self.assertRaises(kiln.KilnError) as caught:
                    step(x, bad)
                self.assertIn("dma_gather", str(caught.exception))
                self.assertIn(f"partition 4 reads index {label}, outside [0, 4)",
                              str(caught.exception))
        torch_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
        for _ in range(2):
            loss = eager_step(torch_opt, reference, x, y)
        self.assertAlmostEqual(float(step(x, y)), loss, delta=1e-4 * loss)

    def test_a_step_that_fails_does_not_count(self):
        # AdamW's bias correction and the per-step seeds read the step count:
        # a step stopped by a bad label leaves it, as eager PyTorch's
        # optimizer never sees a step that raised.
        torch.manual_seed(0)
        model = models.MLP(16, 32, 4)
        reference = copy.deepcopy(model)
        opt = kiln.optim.AdamW(lr=1e-2)
        step = kiln.compile_step(model, F.cross_entropy, opt)
        torch_opt = kiln.optim.torch_optimizer(opt, reference.parameters())
        x, y = torch.randn(8, 16), torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
        bad = y.clone()
        bad[4] = 4
        for i in range(3):
            if i == 1:
                with self.assertRaises(kiln.KilnError):
                    step(x, bad)
                self.assertEqual(step.steps, 1)
            got = float(step(x, y))
            loss = eager_step(torch_opt, reference, x, y)
            self.assertAlmostEqual(got, loss, delta=1e-4 * loss)

    def test_dropout_becomes_seeded_kgraph_dropout(self):
        model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.25), nn.Linear(8, 2))
        step = kiln.compile_step(model, F.cross_entropy, kiln.optim.SGD(lr=0.1))
        graph = step.graph(torch.randn(4, 8), torch.tensor([0, 1, 0, 1]))
        ops = [n.op for n in graph.nodes]
        self.assertIn("dropout", ops)
        seeds = [i for i in graph.inputs if i.name == "seed"]
        self.assertEqual(len(seeds), 1)
        dropout = next(n for n in graph.nodes if n.op == "dropout")
        p = next(a.value.f for a in dropout.attributes if a.name == "p")
        self.assertAlmostEqual(p, 0.25)

    def test_unusable_cache_root_trains_in_memory_with_one_warning(self):
        # The cache is an optimisation: a root that is a file, or missing
        # under KILN_CACHE_READONLY=1, costs the cache, not the run.
        root_file = os.path.join(self.cache.name, "a-file")
        with open(root_file, "w") as f:
            f.write("not a directory")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        for setting in ({"KILN_CACHE_URL": root_file},
                        {"KILN_CACHE_URL": os.path.join(root_file, "under")},
                        {"KILN_CACHE_URL": os.path.join(self.cache.name, "missing"),
                         "KILN_CACHE_READONLY": "1"}):
            out = subprocess.run([sys.executable, "-c", UNCACHED_SCRIPT], cwd=HERE,
                                 env=dict(env, **setting), capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(out.stdout.split(), ["compiled-not-cached"] * 2)
            warnings = [line for line in out.stderr.splitlines() if line.strip()]
            self.assertEqual(len(warnings), 1, out.stderr)
            self.assertRegex(warnings[0], r"^kiln: warning: cache root '.*' .*; "
                             r"compiling in memory, nothing is cached$")

    def test_unknown_cache_url_scheme_is_an_error_not_a_directory(self):
        os.environ["KILN_CACHE_URL"] = "gs://bucket/kiln"
        cwd = os.getcwd()
        os.chdir(self.cache.name)
        try:
            step = kiln.compile_step(models.MLP(16, 32, 4), F.cross_entropy,
                                     kiln.optim.SGD(lr=0.1))
            with self.assertRaises(kiln.KilnError) as caught:
                step(torch.randn(8, 16), torch.randint(0, 4, (8,)))
            self.assertIn("the gs:// scheme is not supported", str(caught.exception))
            self.assertFalse(os.path.exists("gs:"))
        finally:
            os.chdir(cwd)

    def test_supported_op_table_is_documented(self):
        with open(os.path.join(HERE, "..", "..", "..", "docs", "pytorch.md")) as f:
            doc = f.read()
        missing = [op for op in kiln.SUPPORTED_OPS if f"`{op}`" not in doc]
        self.assertEqual(missing, [], "ops missing from docs/pytorch.md")


if __name__ == "__main__":
    unittest.main()
