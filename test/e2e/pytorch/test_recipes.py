"""Large-model training recipes against eager PyTorch loops written here.

Gradient clipping (torch.nn.utils.clip_grad_norm_), gradient accumulation
(k backward() calls of loss / k, then step()) and LAMB (a plain eager
implementation of the formula docs/pytorch.md gives) each train with
kiln.compile_step and eagerly on the same batches; losses and parameters
agree within 1e-5. The four-worker forms run in test_distributed.py.
"""

import copy
import unittest

import torch
import torch.nn.functional as F

import kiln
import models
from eager_comparison import EagerComparisonTest


def eager_lamb(params, lr, betas, eps, weight_decay, decays):
    """LAMB as docs/pytorch.md states it, on torch tensors: returns step()."""
    state = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]
    t = 0

    def step():
        nonlocal t
        t += 1
        with torch.no_grad():
            for p, (m, v), decay in zip(params, state, decays):
                g = p.grad
                m.mul_(betas[0]).add_((1 - betas[0]) * g)
                v.mul_(betas[1]).add_((1 - betas[1]) * g * g)
                u = (m / (1 - betas[0] ** t)) / ((v / (1 - betas[1] ** t)).sqrt() + eps)
                ratio = 1.0
                if decay:
                    u = u + weight_decay * p
                    p_norm, u_norm = p.norm().item(), u.norm().item()
                    if p_norm > 0 and u_norm > 0:
                        ratio = p_norm / u_norm
                p.sub_(lr * ratio * u)
    return step


def teacher_batches():
    teacher = torch.randn(24, 5, generator=torch.Generator().manual_seed(3))

    def make(g):
        x = torch.randn(6, 24, generator=g)
        return x, (x @ teacher).argmax(dim=1)
    return make


class RecipesTest(EagerComparisonTest):

    def train(self, model, optimizer, eager_step, accumulation, max_norm,
              updates=10, loss_fn=F.cross_entropy, batches=None):
        """Kiln and eager losses (per micro-batch), the eager pre-clip norms,
        Kiln's grad_norm metrics, the step and the eager model."""
        reference = copy.deepcopy(model)
        step = kiln.compile_step(model, loss_fn, optimizer, max_grad_norm=max_norm,
                                 accumulation_steps=accumulation)
        eager_step = eager_step(list(reference.parameters()))
        make = batches or teacher_batches()
        g = torch.Generator().manual_seed(1)
        kiln_losses, eager_losses, norms, metrics = [], [], [], []
        for _ in range(updates):
            reference.zero_grad()
            for _ in range(accumulation):
                x, y = make(g)
                kiln_losses.append(float(step(x, y)))
                loss = loss_fn(reference(x), y)
                (loss / accumulation).backward()
                eager_losses.append(float(loss))
            if max_norm is not None:
                norms.append(float(torch.nn.utils.clip_grad_norm_(
                    reference.parameters(), max_norm)))
                metrics.append(step.metrics["grad_norm"])
            eager_step()
        return kiln_losses, eager_losses, norms, metrics, step, reference

    def torch_adamw(self, params):
        return torch.optim.AdamW(params, lr=1e-2).step

    def test_clipping_matches_clip_grad_norm(self):
        k, t, norms, metrics, step, ref = self.train(
            models.MLP(24, 32, 5), kiln.optim.AdamW(lr=1e-2), self.torch_adamw, 1, 0.5)
        self.assertLossesMatch(k, t, 1e-5, "loss")
        self.assertLossesMatch(metrics, norms, 1e-5, "pre-clip norm")
        self.assertTrue(any(n > 0.5 for n in norms), "clipping never engaged")
        self.assertParametersMatch(step, ref, 1e-5)

    def test_accumulation_with_clipping(self):
        k, t, norms, metrics, step, ref = self.train(
            models.MLP(24, 32, 5), kiln.optim.AdamW(lr=1e-2), self.torch_adamw, 3, 0.5)
        self.assertEqual(step.steps, 10)
        self.assertEqual(step.micro_steps, 30)
        self.assertEqual(len(step.keys), 2, "accumulate and update graphs")
        self.assertLossesMatch(k, t, 1e-5, "loss")
        self.assertLossesMatch(metrics, norms, 1e-5, "pre-clip norm")
        self.assertParametersMatch(step, ref, 1e-5)
        self.assertLess(sum(k[-3:]), sum(k[:3]), "the model did not learn")

    def test_lamb(self):
        model = models.MLP(24, 32, 5)
        decays = [not n.endswith("bias") for n, _ in model.named_parameters()]
        lamb = kiln.optim.LAMB(lr=2e-2, weight_decay=0.01, no_decay=("bias",))
        k, t, norms, metrics, step, ref = self.train(
            model, lamb,
            lambda params: eager_lamb(params, 2e-2, (0.9, 0.999), 1e-6, 0.01, decays),
            2, 1.0)
        self.assertLossesMatch(k, t, 1e-5, "loss")
        self.assertParametersMatch(step, ref, 1e-5)
        self.assertLess(sum(k[-2:]), sum(k[:2]), "the model did not learn")

    def test_checkpoint_between_micro_batches_resumes_the_accumulation(self):
        make = teacher_batches()
        g = torch.Generator().manual_seed(1)
        batches = [make(g) for _ in range(12)]
        model = models.MLP(24, 32, 5)

        def fresh():
            return kiln.compile_step(copy.deepcopy(model), F.cross_entropy,
                                     kiln.optim.Adam(lr=1e-2), accumulation_steps=3,
                                     max_grad_norm=1.0)
        whole = fresh()
        expected = [float(whole(*b)) for b in batches]
        first = fresh()
        for b in batches[:7]:  # two updates and one micro-batch of the third
            first(*b)
        saved = first.checkpoint_state()
        resumed = fresh()
        resumed.load_checkpoint_state(saved)
        got = [float(resumed(*b)) for b in batches[7:]]
        self.assertEqual(got, expected[7:])
        self.assertEqual(resumed.steps, 4)

    def test_bad_recipe_options_are_errors(self):
        with self.assertRaisesRegex(ValueError, "accumulation_steps is 0"):
            kiln.compile_step(models.MLP(), F.cross_entropy, kiln.optim.SGD(lr=0.1),
                              accumulation_steps=0)
        with self.assertRaisesRegex(ValueError, "max_grad_norm is -1"):
            kiln.compile_step(models.MLP(), F.cross_entropy, kiln.optim.SGD(lr=0.1),
                              max_grad_norm=-1)
        with self.assertRaisesRegex(ValueError, "zero_stage is 2"):
            kiln.compile_step(models.MLP(), F.cross_entropy, kiln.optim.SGD(lr=0.1),
                              zero_stage=2)


if __name__ == "__main__":
    unittest.main()
