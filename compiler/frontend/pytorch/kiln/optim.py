"""Optimizer specs: the update rule Kiln traces into the training step.

Each spec computes, in plain tensor ops, exactly the update its torch.optim
namesake applies (torch 1.13, single-tensor path), so that a Kiln step and
an eager PyTorch step agree. Hyper-parameters that change between steps
(the learning rate, Adam's bias corrections) are graph *inputs*, computed
on the host each step: changing the learning rate, its schedule or the
step count never changes the graph or its cache key.

A spec's ``schedule`` scales its learning rate per update (1-based), as a
torch.optim.lr_scheduler.LambdaLR would: ``warmup_cosine(warmup, total)``
is the linear warm-up then cosine decay of Llama and BERT pre-training.
"""

import copy
import math

import torch


def warmup_cosine(warmup, total, floor=0.1):
    """The learning-rate factor of update `step`: linear from 1/warmup to 1
    over `warmup` updates, then a cosine down to `floor` at `total`."""
    def factor(step):
        if step <= warmup:
            return step / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))
    return factor


class Optimizer:
    #: Names of the per-parameter state tensors, in order.
    state_names = ()
    schedule = None

    def __init__(self, lr):
        self.lr = float(lr)

    def with_schedule(self, schedule):
        """This spec with its learning rate scaled by `schedule(step)`."""
        scheduled = copy.copy(self)
        scheduled.schedule = schedule
        return scheduled

    def lr_at(self, step):
        return self.lr * (self.schedule(step) if self.schedule else 1.0)

    def hyper_parameters(self, step):
        """Host-side scalars for 1-based step `step`, by name."""
        return {"lr": self.lr_at(step)}

    def init_state(self, param):
        return {name: torch.zeros_like(param) for name in self.state_names}

    def update(self, param, grad, state, hyper):
        """(new param, new state dict) for one parameter."""
        raise NotImplementedError

    def for_parameter(self, name):
        """The spec that updates parameter `name` (LAMB exempts some
        parameters from weight decay)."""
        return self

    def describe(self):
        fields = ", ".join(f"{k}={v}" for k, v in sorted(vars(self).items()))
        return f"{type(self).__name__}({fields})"


class SGD(Optimizer):
    """torch.optim.SGD with momentum, dampening, weight decay, Nesterov."""

    def __init__(self, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False):
        super().__init__(lr)
        self.momentum = float(momentum)
        self.dampening = float(dampening)
        self.weight_decay = float(weight_decay)
        self.nesterov = bool(nesterov)
        self.state_names = ("momentum_buffer",) if momentum else ()

    def update(self, param, grad, state, hyper):
        if self.weight_decay:
            grad = grad + self.weight_decay * param
        new_state = {}
        if self.momentum:
            # torch starts the buffer at the first gradient; with dampening
            # that differs from momentum * 0 + (1 - dampening) * g, so the
            # host passes first_step = 1 on step 1 and 0 after.
            buf = state["momentum_buffer"]
            damped = (1 - self.dampening) * grad
            buf = self.momentum * buf + damped + hyper["first_step"] * (grad - damped)
            new_state["momentum_buffer"] = buf
            grad = grad + self.momentum * buf if self.nesterov else buf
        return param - hyper["lr"] * grad, new_state

    def hyper_parameters(self, step):
        h = {"lr": self.lr_at(step)}
        if self.momentum:
            h["first_step"] = 1.0 if step == 1 else 0.0
        return h


class Adam(Optimizer):
    """torch.optim.Adam (L2 weight decay added to the gradient)."""

    state_names = ("exp_avg", "exp_avg_sq")
    decoupled = False

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(lr)
        self.beta1, self.beta2 = (float(b) for b in betas)
        self.eps = float(eps)
        self.weight_decay = float(weight_decay)

    def hyper_parameters(self, step):
        return {
            "lr": self.lr_at(step),
            # lr / (1 - beta1^t) and sqrt(1 - beta2^t), as torch computes them
            "step_size": self.lr_at(step) / (1 - self.beta1 ** step),
            "bias_correction2_sqrt": math.sqrt(1 - self.beta2 ** step),
        }

    def update(self, param, grad, state, hyper):
        if self.weight_decay and self.decoupled:
            param = param * (1 - hyper["lr"] * self.weight_decay)
        elif self.weight_decay:
            grad = grad + self.weight_decay * param
        m = self.beta1 * state["exp_avg"] + (1 - self.beta1) * grad
        v = self.beta2 * state["exp_avg_sq"] + (1 - self.beta2) * grad * grad
        denom = v.sqrt() / hyper["bias_correction2_sqrt"] + self.eps
        param = param - hyper["step_size"] * (m / denom)
        return param, {"exp_avg": m, "exp_avg_sq": v}


class AdamW(Adam):
    """torch.optim.AdamW (decoupled weight decay)."""

    decoupled = True

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(lr, betas, eps, weight_decay)


class LAMB(Optimizer):
    """LAMB (You et al., "Large Batch Optimization for Deep Learning"), as
    NVIDIA's BERT pre-training applies it (apex FusedLAMB, decoupled weight
    decay, bias correction). For a parameter p with gradient g at step t:

        m = b1 m + (1 - b1) g            v = b2 v + (1 - b2) g^2
        u = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + wd p
        r = |p| / |u|  if |p| > 0 and |u| > 0, else 1
        p = p - lr r u

    with |.| the L2 norm over the whole parameter. The trust ratio r
    applies where the parameter decays (wd > 0), as in apex; with
    ``adapt_without_decay`` (apex's use_nvlamb) it applies everywhere, and
    ``max_trust_ratio`` clamps it from above (the paper's phi). Parameters
    whose name contains one of ``no_decay`` (BERT: "bias", "LayerNorm")
    neither decay nor adapt. NVIDIA's global gradient-norm clipping before
    the update is ``compile_step(..., max_grad_norm=1.0)``.
    """

    state_names = ("exp_avg", "exp_avg_sq")

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01,
                 no_decay=(), adapt_without_decay=False, max_trust_ratio=None):
        super().__init__(lr)
        self.beta1, self.beta2 = (float(b) for b in betas)
        self.eps = float(eps)
        self.weight_decay = float(weight_decay)
        self.no_decay = tuple(no_decay)
        self.adapt_without_decay = bool(adapt_without_decay)
        self.max_trust_ratio = None if max_trust_ratio is None else float(max_trust_ratio)

    def hyper_parameters(self, step):
        return {"lr": self.lr_at(step), "bias_correction1": 1 - self.beta1 ** step,
                "bias_correction2": 1 - self.beta2 ** step}

    def for_parameter(self, name):
        if self.weight_decay and any(part in name for part in self.no_decay):
            exempt = copy.copy(self)
            exempt.weight_decay = 0.0
            return exempt
        return self

    def update(self, param, grad, state, hyper):
        m = self.beta1 * state["exp_avg"] + (1 - self.beta1) * grad
        v = self.beta2 * state["exp_avg_sq"] + (1 - self.beta2) * grad * grad
        u = (m / hyper["bias_correction1"]) / (
            (v / hyper["bias_correction2"]).sqrt() + self.eps)
        if self.weight_decay:
            u = u + self.weight_decay * param
        if self.weight_decay or self.adapt_without_decay:
            p_norm = torch.linalg.vector_norm(param)
            u_norm = torch.linalg.vector_norm(u)
            # Both branches finite: the device selects arithmetically.
            adapt = (p_norm > 0) & (u_norm > 0)
            one = torch.ones_like(p_norm)
            ratio = torch.where(adapt, p_norm / torch.where(adapt, u_norm, one), one)
            if self.max_trust_ratio is not None:
                ratio = torch.clamp(ratio, max=self.max_trust_ratio)
            u = u * ratio
        return param - hyper["lr"] * u, {"exp_avg": m, "exp_avg_sq": v}


class MasterWeights(Optimizer):
    """`inner`'s update on f32 master copies of a bf16 model's
    parameters: the model computes in bf16, the optimizer keeps each
    parameter's f32 copy and `inner`'s state in f32, adds the bf16 gradient
    to the copy in f32, and the model's parameter is the copy rounded. Small
    updates accumulate in the copy instead of rounding away (Neuron's "BF16
    with an FP32 copy of the weights"; DeepSpeed's and Apex's master
    weights).

        step = kiln.compile_step(model.to(torch.bfloat16), loss_fn,
                                 kiln.optim.MasterWeights(kiln.optim.AdamW(lr=1e-4)))
    """

    def __init__(self, inner):
        if not isinstance(inner, Optimizer) or isinstance(inner, MasterWeights):
            raise TypeError("kiln.optim.MasterWeights wraps an SGD, Adam, AdamW or LAMB spec")
        super().__init__(inner.lr)
        self.inner = inner
        self.state_names = ("master",) + tuple(inner.state_names)

    def with_schedule(self, schedule):
        scheduled = copy.copy(self)
        scheduled.inner = self.inner.with_schedule(schedule)
        return scheduled

    def hyper_parameters(self, step):
        return self.inner.hyper_parameters(step)

    def init_state(self, param):
        if param.dtype != torch.bfloat16:
            raise TypeError(f"kiln.optim.MasterWeights keeps f32 copies of bf16 "
                            f"parameters, not of {param.dtype} ones; give it a bf16 model")
        master = param.detach().float()
        return {"master": master, **self.inner.init_state(master)}

    def for_parameter(self, name):
        inner = self.inner.for_parameter(name)
        if inner is self.inner:
            return self
        wrapped = copy.copy(self)
        wrapped.inner = inner
        return wrapped

    def update(self, param, grad, state, hyper):
        own = {name: state[name] for name in self.inner.state_names}
        master, new_state = self.inner.update(state["master"], grad.float(), own, hyper)
        return master.to(param.dtype), {"master": master, **new_state}


def torch_optimizer(spec, params):
    """The torch.optim optimizer a spec mirrors (for eager comparisons)."""
    if isinstance(spec, SGD):
        return torch.optim.SGD(params, lr=spec.lr, momentum=spec.momentum,
                               dampening=spec.dampening,
                               weight_decay=spec.weight_decay,
                               nesterov=spec.nesterov)
    if isinstance(spec, AdamW):
        return torch.optim.AdamW(params, lr=spec.lr, betas=(spec.beta1, spec.beta2),
                                 eps=spec.eps, weight_decay=spec.weight_decay)
    if isinstance(spec, Adam):
        return torch.optim.Adam(params, lr=spec.lr, betas=(spec.beta1, spec.beta2),
                                eps=spec.eps, weight_decay=spec.weight_decay)
    raise TypeError(f"no torch optimizer for {spec!r}")
