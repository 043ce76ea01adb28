"""Convolutional networks through the front end and the compiler: every
aten op of a CNN training step converts, and the step -- forward, backward,
optimizer update, batch norm's running statistics -- computes what eager
PyTorch computes, on the kgraph reference interpreter (`kiln interpret`,
which checks the conversion and the kgraph ops' semantics apart from the
tile phase) and compiled, on the simulator."""

import copy
import os
import subprocess
import tempfile
import unittest

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

import kiln
import models

KILN = os.path.join(os.environ["KILN_BIN"], "kiln")


def interpret_step(step, batch):
    """One step of `step` on the reference interpreter: {output: array}."""
    graph = step.graph(*batch)
    arrays = {}
    for name, tensor in step.state_dict().items():
        prefix = "p." if name in step.parameters() else "s."
        arrays[prefix + name] = tensor.numpy()
    for name, value in step._spec.hyper(1).items():
        arrays["h." + name] = np.array(value, dtype=np.float32)
    for i, tensor in enumerate(batch):
        arrays[f"b.{i}"] = tensor.numpy()
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "step.kgraph.pb"), "wb") as f:
            f.write(graph.SerializeToString())
        np.savez(os.path.join(tmp, "in.npz"), **arrays)
        subprocess.run([KILN, "interpret", os.path.join(tmp, "step.kgraph.pb"),
                        "--inputs", os.path.join(tmp, "in.npz"),
                        "--outputs", os.path.join(tmp, "out.npz")],
                       check=True, capture_output=True)
        with np.load(os.path.join(tmp, "out.npz")) as out:
            return dict(out)


class ConvolutionalStepTest(unittest.TestCase):
    def check_step(self, model, batch, optimizer, tolerance=1e-5):
        """One step on the interpreter against eager PyTorch in float64 (the
        interpreter accumulates in double; deep nets' f32 gradients in
        eager PyTorch carry more rounding than the tolerance)."""
        reference = copy.deepcopy(model).double()
        step = kiln.compile_step(model, F.cross_entropy, optimizer)
        out = interpret_step(step, batch)
        torch_opt = kiln.optim.torch_optimizer(optimizer, reference.parameters())
        torch_opt.zero_grad()
        inputs = [t.double() if t.is_floating_point() else t for t in batch[:-1]]
        loss = F.cross_entropy(reference(*inputs), batch[-1])
        loss.backward()
        torch_opt.step()
        self.assertAlmostEqual(float(out["loss"]), float(loss), delta=tolerance)
        expected = dict(reference.named_parameters())
        expected.update(reference.named_buffers())
        checked = 0
        for name, want in expected.items():
            key = ("next.p." if name in step.parameters() else "next.s.") + name
            got = out.get(key)
            if got is None:
                # Unchanged by the step (a frozen buffer).
                self.assertTrue(torch.equal(want, dict(model.named_buffers())[name]),
                                name)
                continue
            scale = max(1.0, float(want.detach().abs().max()))
            np.testing.assert_allclose(got, want.detach().numpy().astype(got.dtype), rtol=0,
                                       atol=tolerance * scale, err_msg=name)
            checked += 1
        self.assertGreater(checked, 0)
        return out

    def test_small_cnn_with_batch_norm_and_both_poolings(self):
        torch.manual_seed(0)
        out = self.check_step(models.SmallCNN(), (torch.randn(4, 1, 16, 16),
                                                  torch.tensor([0, 2, 1, 2])),
                              kiln.optim.SGD(lr=0.1, momentum=0.9, weight_decay=1e-4))
        # The running statistics moved, as eager PyTorch moves them.
        self.assertIn("next.s.stem.1.running_mean", out)
        self.assertEqual(int(out["next.s.stem.1.num_batches_tracked"]), 1)

    def test_resnet18(self):
        torch.manual_seed(0)
        model = torchvision.models.resnet18(num_classes=10)
        self.check_step(model, (torch.randn(4, 3, 32, 32), torch.tensor([1, 3, 5, 7])),
                        kiln.optim.SGD(lr=0.05, momentum=0.9, weight_decay=1e-4))

    def test_eval_mode_batch_norm_keeps_running_statistics(self):
        torch.manual_seed(0)
        model = models.SmallCNN()
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.uniform_(-1, 1)
                    m.running_var.uniform_(0.5, 2)
        model.eval()
        out = self.check_step(model, (torch.randn(2, 1, 16, 16), torch.tensor([0, 1])),
                              kiln.optim.SGD(lr=0.1))
        self.assertNotIn("next.s.stem.1.running_mean", out)

    def test_uneven_adaptive_pooling_and_depthwise(self):
        torch.manual_seed(0)
        model = nn.Sequential(
            nn.Conv2d(3, 3, 5, padding=2, groups=3, bias=False),
            nn.BatchNorm2d(3, affine=False), nn.ReLU(),
            nn.AdaptiveAvgPool2d((3, 2)), nn.Flatten(), nn.Linear(18, 2))
        self.check_step(model, (torch.randn(2, 3, 7, 5), torch.tensor([0, 1])),
                        kiln.optim.Adam(lr=1e-2))

    def test_compiled_small_cnn_tracks_eager_for_20_steps(self):
        # The step compiled, run on the simulator with the hazard checker
        # on, against eager PyTorch: loss, parameters and running
        # statistics.
        model, reference, step = self.track_eager(
            kiln.optim.SGD(lr=0.05, momentum=0.9, weight_decay=1e-4), 1e-4,
            check_hazards=True)
        step.copy_to(model)
        for (name, got), want in zip(model.state_dict().items(),
                                     reference.state_dict().values()):
            np.testing.assert_allclose(got.double().numpy(), want.double().numpy(),
                                       rtol=0, atol=1e-4, err_msg=name)
        self.assertEqual(int(model.stem[1].num_batches_tracked), 20)

    def test_compiled_small_cnn_with_auto_cast_bf16(self):
        # The documented bf16 tolerance (docs/pytorch.md).
        self.track_eager(kiln.optim.SGD(lr=0.05, momentum=0.9), 2e-2,
                         flags=["--auto-cast=bf16"])

    def track_eager(self, optimizer, tolerance, **options):
        """20 compiled steps of the small CNN against eager PyTorch, the
        loss within `tolerance` relative at each; (model, eager model,
        step)."""
        torch.manual_seed(0)
        model = models.SmallCNN()
        reference = copy.deepcopy(model)
        step = kiln.compile_step(model, F.cross_entropy, optimizer, **options)
        torch_opt = kiln.optim.torch_optimizer(optimizer, reference.parameters())
        for i in range(20):
            x, y = torch.randn(8, 1, 16, 16), torch.randint(0, 3, (8,))
            loss = float(step(x, y))
            torch_opt.zero_grad()
            expected = F.cross_entropy(reference(x), y)
            expected.backward()
            torch_opt.step()
            self.assertLess(abs(loss - float(expected)) / float(expected),
                            tolerance, i)
        return model, reference, step

    def test_compiled_resnet18_step_matches_eager(self):
        # One compiled step of torchvision's ResNet-18 against eager
        # PyTorch in float64. Over many steps the two drift apart as eager
        # f32 and f64 do: batch norm over four values per channel in the
        # last stage makes the step chaotic (eager f32 and f64 differ by 1 %
        # in the loss by the third step at lr = 0.002).
        torch.manual_seed(0)
        model = torchvision.models.resnet18(num_classes=10)
        reference = copy.deepcopy(model).double()
        initial = copy.deepcopy(model.state_dict())
        opt = kiln.optim.SGD(lr=0.01, momentum=0.9, weight_decay=1e-4)
        step = kiln.compile_step(model, F.cross_entropy, opt)
        torch_opt = kiln.optim.torch_optimizer(opt, reference.parameters())
        x, y = torch.randn(4, 3, 32, 32), torch.tensor([1, 3, 5, 7])
        loss = float(step(x, y))
        torch_opt.zero_grad()
        expected = F.cross_entropy(reference(x.double()), y)
        expected.backward()
        torch_opt.step()
        self.assertLess(abs(loss - float(expected)) / float(expected), 1e-5)
        state = step.state_dict()
        for name, want in reference.state_dict().items():
            if name not in state or name.endswith("num_batches_tracked"):
                continue
            moved = (want - initial[name].double()).abs().max().item()
            error = (state[name].double() - want).abs().max().item()
            # Within a thousandth of how far the step moved the tensor.
            self.assertLessEqual(error, 1e-3 * moved + 1e-7, name)

    def test_unsupported_convolutions_are_named(self):
        model = nn.Sequential(nn.ConvTranspose2d(2, 2, 3), nn.Flatten(), nn.LazyLinear(2))
        model(torch.randn(1, 2, 4, 4))
        step = kiln.compile_step(model, F.cross_entropy, kiln.optim.SGD(lr=0.1))
        with self.assertRaisesRegex(kiln.ConversionError,
                                    "transposed convolution is not supported"):
            step.graph(torch.randn(1, 2, 4, 4), torch.tensor([0]))

    def test_max_pool_indices_read_elsewhere_are_an_error(self):
        def fn(params, state, x, y):
            pooled, indices = F.max_pool2d(x * params["w"], 2, return_indices=True)
            loss = pooled.sum() + indices.float().sum() * 0
            return loss, {}, {}
        step = kiln.compile_step(fn, params={"w": torch.ones(1)})
        with self.assertRaisesRegex(kiln.ConversionError, "indices of max_pool2d"):
            step.graph(torch.randn(1, 1, 4, 4), torch.zeros(1))


if __name__ == "__main__":
    unittest.main()
