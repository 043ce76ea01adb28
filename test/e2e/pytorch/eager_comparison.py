"""The fixture of the tests that train with Kiln and eagerly side by side:
a private cache per test, a fixed seed, and step-by-step comparisons."""

import os
import tempfile
import unittest

import torch


def master_weights_backward_and_step(reference, masters, torch_opt, loss):
    """An eager step of a bf16 model on f32 master copies: the bf16
    gradients added to the copies in f32, the model the copies rounded
    (what kiln.optim.MasterWeights does on the device)."""
    reference.zero_grad()
    loss.backward()
    for master, p in zip(masters, reference.parameters()):
        master.grad = p.grad.float()
    torch_opt.step()
    with torch.no_grad():
        for master, p in zip(masters, reference.parameters()):
            p.copy_(master)


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
