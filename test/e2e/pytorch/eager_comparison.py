"""The fixture of the tests that train with Kiln and eagerly side by side:
a private cache per test, a fixed seed, and step-by-step comparisons."""

import os
import tempfile
import unittest

import torch


class EagerComparisonTest(unittest.TestCase):
    def setUp(self):
        self.cache = tempfile.TemporaryDirectory()
        os.environ["KILN_CACHE_URL"] = self.cache.name
        torch.manual_seed(0)

    def tearDown(self):
        self.cache.cleanup()

    def assertLossesMatch(self, kiln_losses, torch_losses, rtol, what="step"):
        for i, (k, t) in enumerate(zip(kiln_losses, torch_losses)):
            self.assertLessEqual(abs(k - t), rtol * abs(t),
                                 f"{what} {i + 1}: Kiln {k}, PyTorch {t}")

    def assertParametersMatch(self, step, reference, atol):
        trained = step.parameters()
        for name, p in reference.named_parameters():
            diff = (trained[name] - p.detach()).abs().max().item()
            self.assertLessEqual(diff, atol, f"parameter {name} differs by {diff}")
