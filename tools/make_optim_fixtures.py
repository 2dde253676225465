#!/usr/bin/env python3
"""Writes tests/fixtures/optim/{adamw,clip,lr_schedule}.json: expected values for
tests/unit/train/optim_test.cpp from PyTorch (torch.optim.AdamW, torch.nn.utils.clip_grad_norm_)
and torchtitan's learning-rate schedule driven through torch's LambdaLR.

Run from the repository root:  python3 tools/make_optim_fixtures.py
Seeded: the same library versions reproduce the files exactly.

torchtitan is not imported: the PyPI package (0.3.0) pulls wandb, datasets, torchdata, tyro,
spmd_types... just to import its config module. The schedule below is a verbatim copy of
LRSchedulersContainer.Config.build / linear_warmup_stable_decay from
torchtitan/components/optimizer/lr_scheduler.py of the torchtitan 0.3.0 wheel on PyPI, driven
through torch's real LambdaLR exactly as LRSchedulersContainer does.
"""
import functools
import json
import math
import os
import sys

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "optim")


def flat(t):
    return [float(x) for x in t.detach().reshape(-1).tolist()]


# ---------------------------------------------------------------------------------------------
# AdamW
# ---------------------------------------------------------------------------------------------
SHAPES = {"a.weight": [3, 5], "b.bias": [17], "c.w": [2, 3, 7], "d.scalar": [1], "e.big": [2, 37]}


def adamw_case(name, foreach, beta1, beta2, eps, weight_decay, lrs, seed):
    gen = torch.Generator().manual_seed(seed)
    params = []
    for fqn, shape in SHAPES.items():
        params.append(torch.nn.Parameter(torch.randn(*shape, generator=gen, dtype=torch.float32)))
    kwargs = dict(lr=lrs[0], betas=(beta1, beta2), eps=eps, weight_decay=weight_decay)
    if foreach is not None:
        kwargs["foreach"] = foreach
    opt = torch.optim.AdamW(params, **kwargs)
    case = {
        "name": name,
        "foreach": foreach,
        "beta1": beta1,
        "beta2": beta2,
        "eps": eps,
        "weight_decay": weight_decay,
        "lrs": lrs,
        "params": [{"fqn": f, "shape": s, "value": flat(p)} for (f, s), p in zip(SHAPES.items(), params)],
        "steps": [],
    }
    for step, lr in enumerate(lrs, start=1):
        grads = []
        for i, p in enumerate(params):
            scale = [1.0, 0.01, 30.0][(i + step) % 3]
            g = torch.randn(p.shape, generator=gen, dtype=torch.float32) * scale
            if i == 2:
                g.view(-1)[::5] = 0.0  # exact zeros: v decays, m decays
            p.grad = g
            grads.append(flat(g))
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        after = []
        for p in params:
            st = opt.state[p]
            after.append({"param": flat(p), "exp_avg": flat(st["exp_avg"]),
                          "exp_avg_sq": flat(st["exp_avg_sq"])})
        case["steps"].append({"lr": lr, "grads": grads, "after": after})
    return case


def make_adamw():
    return {
        "torch_version": torch.__version__,
        "cases": [
            adamw_case("torchtitan_defaults_foreach_false", False, 0.9, 0.95, 1e-8, 0.1,
                       [8e-4, 1e-2, 3e-3, 0.1, 5e-4], 1),
            adamw_case("torch_defaults_foreach_default", None, 0.9, 0.999, 1e-8, 0.01,
                       [1e-3, 1e-3, 2e-2, 1e-4, 5e-2], 2),
            adamw_case("odd_betas_big_eps_foreach_false", False, 0.8, 0.99, 1e-3, 0.3,
                       [0.05, 0.2, 1e-3, 0.01, 0.07], 3),
        ],
    }


# ---------------------------------------------------------------------------------------------
# clip_grad_norm_
# ---------------------------------------------------------------------------------------------
def clip_case(name, max_norm, scale, seed):
    gen = torch.Generator().manual_seed(seed)
    params = [torch.nn.Parameter(torch.zeros(*s)) for s in SHAPES.values()]
    for i, p in enumerate(params):
        p.grad = torch.randn(p.shape, generator=gen, dtype=torch.float32) * scale * (i + 1)
    before = [flat(p.grad) for p in params]
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=False)
    return {"name": name, "max_norm": max_norm, "shapes": list(SHAPES.values()),
            "grads": before, "norm": float(norm), "clipped": [flat(p.grad) for p in params]}


def make_clip():
    return {
        "torch_version": torch.__version__,
        "cases": [
            clip_case("above_max_norm", 1.0, 1.0, 10),
            clip_case("far_above_max_norm", 0.5, 100.0, 11),
            clip_case("below_max_norm", 1000.0, 1.0, 12),
            clip_case("tiny_grads", 1.0, 1e-4, 13),
        ],
    }


# ---------------------------------------------------------------------------------------------
# torchtitan linear warmup + stable + decay
# ---------------------------------------------------------------------------------------------
def _verbatim_lambda(training_steps, warmup_steps_cfg, decay_ratio, decay_type, min_lr_factor):
    """Verbatim from torchtitan 0.3.0 torchtitan/components/optimizer/lr_scheduler.py
    (LRSchedulersContainer.Config.build, total_steps=None; logger.warning calls dropped)."""
    total_steps = training_steps
    warmup_steps = int(warmup_steps_cfg)
    if warmup_steps > total_steps:
        warmup_steps = total_steps
    if decay_ratio is not None:
        decay_steps = round(total_steps * decay_ratio)
        if warmup_steps + decay_steps > total_steps:
            decay_steps = total_steps - warmup_steps
    else:
        decay_steps = total_steps - warmup_steps
    # Add a virtual last step to prevent the learning rate from dropping to 0
    stable_steps = total_steps + 1 - warmup_steps - decay_steps
    lr_decay_type = decay_type

    def linear_warmup_stable_decay(current_step, warmup_steps, stable_steps, decay_steps,
                                   lr_decay_type, min_lr_factor):
        warmup_stable_steps = warmup_steps + stable_steps
        if current_step < warmup_steps:
            # linear warmup
            # 0-indexed step, hence + 1 adjustments
            current_step += 1
            assert warmup_steps != 0, "warmup_steps must not be zero to reach this branch"
            curr_adjustment = float(current_step / warmup_steps)
        elif current_step < warmup_stable_steps:
            curr_adjustment = 1.0
        else:
            # 0-indexed step, hence + 1 adjustments
            current_step += 1
            assert decay_steps != 0, "decay_steps must not be zero to reach this branch"
            progress = float(current_step - warmup_stable_steps) / decay_steps
            if lr_decay_type == "linear":
                curr_adjustment = 1 - progress
            elif lr_decay_type == "sqrt":
                curr_adjustment = 1 - math.sqrt(progress)
            elif lr_decay_type == "cosine":
                curr_adjustment = 0.5 * (1.0 + math.cos(math.pi * progress))
            else:
                raise ValueError(f"Unknown lr_decay_type: {lr_decay_type}")
            curr_adjustment = min_lr_factor + (1 - min_lr_factor) * curr_adjustment
        return curr_adjustment

    return functools.partial(linear_warmup_stable_decay, warmup_steps=warmup_steps,
                             stable_steps=stable_steps, decay_steps=decay_steps,
                             lr_decay_type=lr_decay_type, min_lr_factor=min_lr_factor)


def _schedulers(opt, steps, warmup, decay_ratio, decay_type, min_lr_factor):
    """What LRSchedulersContainer does for one optimizer: a LambdaLR over the lambda."""
    lam = _verbatim_lambda(steps, warmup, decay_ratio, decay_type, min_lr_factor)
    return torch.optim.lr_scheduler.LambdaLR(opt, lam), "verbatim copy of torchtitan 0.3.0"


SOURCE = []


def schedule_case(steps, warmup, decay_ratio, decay_type, min_lr_factor):
    base_lr = 0.5
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([p], lr=base_lr)
    sched, source = _schedulers(opt, steps, warmup, decay_ratio, decay_type, min_lr_factor)
    SOURCE.append(source)
    factors = []
    # The trainer's loop: step s uses the lr set now; then optimizer.step(); scheduler.step().
    for _ in range(steps):
        factors.append(opt.param_groups[0]["lr"] / base_lr)
        p.grad = torch.zeros(1)
        opt.step()
        sched.step()
    return {"steps": steps, "warmup_steps": warmup,
            "decay_ratio": -1.0 if decay_ratio is None else decay_ratio,
            "decay_type": decay_type, "min_lr_factor": min_lr_factor, "factors": factors}


def make_schedule():
    cases = []
    for decay_type in ["linear", "sqrt", "cosine"]:
        cases.append(schedule_case(20, 5, None, decay_type, 0.0))
        cases.append(schedule_case(20, 5, 0.3, decay_type, 0.1))
        cases.append(schedule_case(17, 0, None, decay_type, 0.0))
        cases.append(schedule_case(17, 0, 0.5, decay_type, 0.2))
    cases.append(schedule_case(10, 2, 0.25, "linear", 0.0))   # round(2.5) == 2 (half to even)
    cases.append(schedule_case(10, 2, 0.35, "linear", 0.0))   # round(3.5) == 4
    cases.append(schedule_case(10, 3, 0.0, "linear", 0.0))    # no decay: stable to the end
    cases.append(schedule_case(10, 10, None, "cosine", 0.0))  # all warmup
    cases.append(schedule_case(8, 12, None, "linear", 0.0))   # warmup clamped to steps
    cases.append(schedule_case(10, 6, 0.8, "sqrt", 0.05))     # decay clamped to steps - warmup
    cases.append(schedule_case(1, 0, None, "linear", 0.0))
    cases.append(schedule_case(200, 20, None, "cosine", 0.1))
    return {"torch_version": torch.__version__, "source": sorted(set(SOURCE)), "cases": cases}


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    for name, data in [("adamw", make_adamw()), ("clip", make_clip()),
                       ("lr_schedule", make_schedule())]:
        path = os.path.join(OUT, name + ".json")
        with open(path + ".tmp", "w") as f:
            json.dump(data, f, separators=(",", ":"))
            f.write("\n")
        os.replace(path + ".tmp", path)
        print("wrote", os.path.relpath(path), file=sys.stderr)


if __name__ == "__main__":
    main()
