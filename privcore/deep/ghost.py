"""Per-example clipping without per-example gradients of the whole model ("book-keeping" ghost clipping).

The clipped sum sum_i min(1, C / ||g_i||) g_i of :func:`privcore.deep.dpsgd.clip_and_sum`, computed
from one forward and one backward pass. For every layer the pass keeps its input a and the gradient
b of the summed loss with respect to its output; with a per-example loss (GroupNorm, no batch
statistics) b_i depends on example i alone, and example i's gradient of a layer's weight is a
function of (a_i, b_i) only:

- ``Linear`` on [batch, features]: g_i = b_i a_i^T, so ||g_i||^2 = ||a_i||^2 ||b_i||^2; bias b_i.
- ``Conv2d``: with a_i unfolded to [C_in k k, L] and b_i to [C_out, L] (L output positions),
  g_i = b_i a_i^T, and either ||g_i||^2 = <a_i^T a_i, b_i^T b_i> (the Gram or "ghost norm" trick,
  L^2 work per example; see ``GHOST_FACTOR`` for when) or directly from g_i formed for this layer
  alone (mixed ghost clipping, Bu et al. 2022; one grouped convolution weight-backward with the
  batch as groups), whose weighted sum is then the layer's clipped sum; bias: sum over positions of b_i.
- ``GroupNorm`` affine parameters: g_i = sum over positions of xhat_i * b_i (weight) and of b_i (bias),
  per example (cheap: [batch, C]).

The squared norms of all layers (float64, :mod:`privcore.roundoff`) add up to ||g_i||^2, the factors
c_i = min(1, C / ||g_i||) are those of ``clip_and_sum`` (zero for an example whose norm is not finite; on the
Gram route also at most GRAM_CAP C / M_i, which bounds that route's rounding), and each layer's clipped sum is
its ordinary weight gradient with b_i scaled by c_i (for convolutions on the Gram route, PyTorch's
own convolution weight backward) or the c-weighted sum of the per-example g_i just formed, so no
second backward pass and no per-example gradient of the whole model is formed (Bu et al.,
"Differentially private optimization on large model at small cost", 2023). Any parameter outside
these three layer types makes :func:`supports_ghost` false; a layer used twice, or not at all, in
one forward pass is an error.
The norms are exact only if every parameter enters the loss through its own layer's call (a
forward that also used, say, ``fc.weight`` directly would make them too small), so
``SGDConfig.clipping="auto"`` picks ghost clipping only for this project's models
(:mod:`privcore.deep.models`), whose forward passes are known and tested against a naive loop.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F
from torch.nn.grad import conv2d_weight

from ..precision import clip_factors, exact_fp32
from ..roundoff import GRAM_CAP, GRAM_SUM_POSITIONS, gamma, outer_sum, squared_norms, weighted_sum
from .routes import GRAM_CHUNK_ELEMENTS, conv_route as cost_route

__all__ = ["supports_ghost", "ghost_clip_and_sum", "CONV_ROUTES"]

#: How each convolution's norm is formed: "device" (``GHOST_FACTOR`` / ``PER_EXAMPLE_ROUTE`` of the device:
#: what clipping="ghost" and "auto" have always done, so their results are unchanged), "cost" (mixed ghost
#: clipping: the cheaper of ghost norm and per-example gradients per layer, :func:`privcore.deep.routes.conv_route`),
#: "gram" (the ghost norm everywhere) or "per-example" (per-example weight gradients everywhere). On the
#: last three the per-example weight gradients are formed before the clipping arithmetic, with the
#: forward's precision (TF32 on CUDA may round them, as torch.func's per-example gradients): their norms
#: and the clipped sum are then computed from those same tensors (float64 norms, float32 partial sums added in
#: float64: privcore.roundoff), so each example still adds at most the clip. The Gram route's norm and sum come
#: from different kernels and are computed in float64, the norm as an upper bound (see ``_gram_norms``).
CONV_ROUTES = ("device", "cost", "gram", "per-example")

_LAYERS = (nn.Linear, nn.Conv2d, nn.GroupNorm)
# A convolution's norms take the Gram (ghost-norm) route when GHOST_FACTOR[device] L^2 <= C_out C_in k k,
# else its per-example weight gradients. Both are exact. On a CPU the per-example route is faster
# for every layer of both models (unfold is slow there), so the CPU never takes the Gram route. On an
# H100 per-example gradients throughout (factor inf) are faster than the usual mixed rule (factor 1)
# for ResNet-20, so CUDA takes them too (only an explicit clipping="ghost" uses this on CUDA: "auto"
# takes torch.func there). Other devices: the mixed rule. ``bench/bench_deep.py`` (``--gpu-variants``
# on CUDA) times the routes.
GHOST_FACTOR: dict[str, float] = {"cpu": math.inf, "cuda": math.inf}
#: Device types on which the clipping never reads a value back to the host (see ``_clip_records``).
SYNC_FREE_DEVICES = ("cuda",)
# How a layer's per-example weight gradients are formed: "grouped" (one grouped convolution weight
# backward, the batch folded into the channels; fastest on a CPU) or "unfold" (unfold + one batched
# matrix product, as Opacus does).
PER_EXAMPLE_ROUTE: dict[str, str] = {"cpu": "grouped", "cuda": "grouped"}


def supports_ghost(model: nn.Module) -> bool:
    """True when every trainable parameter belongs to a Linear (2-D input), Conv2d (groups 1) or
    affine GroupNorm layer, so that :func:`ghost_clip_and_sum` covers the whole gradient."""
    covered = set()
    for name, module in model.named_modules():
        if isinstance(module, nn.Conv2d) and (module.groups != 1 or module.padding_mode != "zeros"
                                              or isinstance(module.padding, str)):
            return False
        if isinstance(module, _LAYERS):
            covered.update(f"{name}.{p}" if name else p for p, _ in module.named_parameters(recurse=False))
    return covered == {k for k, _ in model.named_parameters()}


def _kept(t: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """t with the rows of examples outside ``keep`` zeroed (None: all kept)."""
    return t if keep is None else torch.where(keep.view(-1, *([1] * (t.dim() - 1))), t, torch.zeros_like(t))


def _takes_per_example(module: nn.Conv2d, a: torch.Tensor, b: torch.Tensor, route: str) -> bool:
    """Whether this layer's norm comes from its per-example weight gradients (else the Gram route)."""
    L = b[0, 0].numel()
    if L > GRAM_SUM_POSITIONS:  # one example's positions alone would exceed the Gram route's summation bound
        return True
    cin_kk = module.in_channels * module.kernel_size[0] * module.kernel_size[1]
    if route == "device":
        return L * L * GHOST_FACTOR.get(a.device.type, 1.0) > module.out_channels * cin_kk
    if route == "cost":
        return cost_route(L, cin_kk, module.out_channels) == "per-example"
    return route == "per-example"


def _per_example_conv(module: nn.Conv2d, a: torch.Tensor, b: torch.Tensor, weight_shape: torch.Size
                      ) -> torch.Tensor:
    """This layer's per-example weight gradients [n, *weight_shape], by PER_EXAMPLE_ROUTE: one grouped
    convolution weight-backward with the batch folded into the channels (groups = n), or unfold + bmm."""
    n, cout = b.shape[0], b.shape[1]
    if PER_EXAMPLE_ROUTE.get(a.device.type, "grouped") == "unfold":
        unfolded = F.unfold(a, module.kernel_size, module.dilation, module.padding, module.stride)
        return torch.bmm(b.reshape(n, cout, -1), unfolded.transpose(1, 2)).reshape(n, *weight_shape)
    return conv2d_weight(a.reshape(1, n * a.shape[1], *a.shape[2:]), (n * cout, *weight_shape[1:]),
                         b.reshape(1, n * cout, *b.shape[2:]), module.stride, module.padding,
                         module.dilation, n).reshape(n, *weight_shape)


def _gram_norms(module: nn.Conv2d, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Upper bounds on the squared per-example norms <a_i^T a_i, b_i^T b_i> [n], and the masses
    M_i = sum_s ||a_is|| ||b_is|| over output positions s [n], in float64, in chunks of examples holding
    at most GRAM_CHUNK_ELEMENTS Gram entries each (memory bounded whatever the batch).

    The Gram entries can cancel, so the computed norm's error is bounded against M_i^2, not against
    the norm: |computed - exact| <= gamma_{d+p+L^2+2} M_i^2 (each Gram entry is off by gamma_d
    ||a_s|| ||a_t||, resp. gamma_p ||b_s|| ||b_t||; their L^2 products add gamma_{L^2}); four times that
    is added, so that the bound holds with M_i itself computed in float64."""
    n, cout = b.shape[0], b.shape[1]
    L = b[0, 0].numel()
    d = a.shape[1] * module.kernel_size[0] * module.kernel_size[1]
    slack = 4 * gamma(d + cout + L * L + L + 8, torch.float64)
    chunk = max(1, GRAM_CHUNK_ELEMENTS // (L * L))
    sq, mass = [], []
    for lo in range(0, n, chunk):
        unfolded = F.unfold(a[lo:lo + chunk].double(), module.kernel_size, module.dilation, module.padding,
                            module.stride)
        bl = b[lo:lo + chunk].double().reshape(-1, cout, L)
        m = (unfolded.pow(2).sum(1).sqrt() * bl.pow(2).sum(1).sqrt()).sum(1)
        exact = (torch.bmm(unfolded.transpose(1, 2), unfolded) * torch.bmm(bl.transpose(1, 2), bl)).sum(dim=(1, 2))
        sq.append(exact + slack * m * m)
        mass.append(m)
    return torch.cat(sq), torch.cat(mass)


def _gram_weighted(module: nn.Conv2d, a: torch.Tensor, b: torch.Tensor, weight_shape: torch.Size,
                   c: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """sum_i c_i g_i on the Gram route, in float64: one weight backward per chunk of at most
    GRAM_SUM_POSITIONS (example, position) pairs, the chunks added in float64 (its rounding is bounded
    by gamma sum_i c_i M_i, :func:`privcore.roundoff.sum_error`)."""
    n = a.shape[0]
    per = max(1, GRAM_SUM_POSITIONS // b[0, 0].numel())
    total = None
    for lo in range(0, n, per):
        sl = slice(lo, lo + per)
        k = None if keep is None else keep[sl]
        part = conv2d_weight(_kept(a[sl], k).double(), weight_shape,
                             _kept(b[sl], k).double() * c[sl].double().view(-1, 1, 1, 1),
                             module.stride, module.padding, module.dilation, module.groups)
        total = part if total is None else total + part
    return total


def _conv_terms(module: nn.Conv2d, a: torch.Tensor, b: torch.Tensor, weight: torch.Tensor,
                route: str = "device", per: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, object, torch.Tensor | None]:
    """Squared per-example norm of the weight gradient (float64; on the Gram route an upper bound),
    either the per-example weight gradients [n, ...] (``per`` when formed already, or formed here on the
    per-example route) or a closure for the clipped sum (the Gram route), and the Gram route's masses M_i
    (None on the per-example route)."""
    if per is None and _takes_per_example(module, a, b, route):
        per = _per_example_conv(module, a, b, weight.shape)
    if per is not None:
        return squared_norms(per), per, None
    sq, mass = _gram_norms(module, a, b)

    def weighted(c: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
        return _gram_weighted(module, a, b, weight.shape, c, keep)

    return sq, weighted, mass


def ghost_clip_and_sum(model: nn.Module, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor],
                       x: torch.Tensor, y: torch.Tensor, clip: float, amp: bool = False,
                       conv_route: str = "device") -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Same result as ``clip_and_sum(per_sample_grads(...), clip)``: the clipped sum and the norms [b].

    ``model`` must satisfy :func:`supports_ghost`. The loss is the sum over examples of each one's
    cross-entropy, so each example's gradient is its own loss's gradient. ``conv_route``: one of
    :data:`CONV_ROUTES` (how each convolution's norm is formed; the same result).
    """
    if conv_route not in CONV_ROUTES:
        raise ValueError(f"conv_route must be one of {', '.join(CONV_ROUTES)}, got {conv_route!r}")
    n = x.shape[0]
    if n == 0:
        return {k: torch.zeros_like(v) for k, v in params.items()}, x.new_zeros(0)
    names = {m: name for name, m in model.named_modules() if isinstance(m, _LAYERS)}
    records: list[tuple[nn.Module, torch.Tensor, torch.Tensor]] = []

    def hook(module: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        records.append((module, inputs[0].detach(), output))

    handles = [m.register_forward_hook(hook) for m in names]
    # Parameters that require grad put every layer output in the graph; only the outputs' gradients
    # are asked for, so autograd skips the weight gradients (and the input image's).
    live = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    dev = x.device.type
    try:
        with torch.enable_grad():
            with torch.autocast(dev, dtype=torch.bfloat16, enabled=amp and dev == "cuda"):
                out = functional_call(model, (live, buffers), (x.detach(),))
            loss = F.cross_entropy(out.to(torch.promote_types(out.dtype, torch.float32)), y, reduction="sum")
            if len({id(m) for m, _, _ in records}) != len(records):
                raise ValueError("ghost clipping needs every layer to be used once per forward pass")
            grads = torch.autograd.grad(loss, [o for _, _, o in records])
    finally:
        for h in handles:
            h.remove()

    formed: dict[int, torch.Tensor] = {}
    if conv_route != "device":  # per-example weight gradients with the forward's precision (see CONV_ROUTES)
        acc = torch.promote_types(next(iter(params.values())).dtype, torch.float32)
        for i, ((module, a, _), b) in enumerate(zip(records, grads)):
            if isinstance(module, nn.Conv2d) and _takes_per_example(module, a, b, conv_route):
                formed[i] = _per_example_conv(module, a.to(acc), b.to(acc), module.weight.shape)
    # The norms and the clipped sum in full float32 on CUDA (no TF32): see privcore.precision.
    with exact_fp32(x.device):
        return _clip_records(records, grads, names, live, params, n, x.device, clip, formed,
                             "device" if conv_route == "device" else "gram")


def _clip_records(records: list, grads: tuple, names: dict, live: dict, params: dict, n: int,
                  device: torch.device, clip: float, formed: dict[int, torch.Tensor] | None = None,
                  conv_route: str = "device") -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The per-example squared norms of every layer, the factors and the clipped sums (``formed``: the
    per-example weight gradients of the convolutions [by record index] formed already; the others take
    ``conv_route``).

    The per-example gradients of the small parameters (biases, GroupNorm's) are put side by side in one
    [n, k] matrix, so their norms and their clipped sum are a few operations whatever the depth, and the
    layers' squared norms are added in one reduction: a GPU step of these models is bound by the number
    of operations launched, not by their arithmetic."""
    acc = torch.promote_types(next(iter(params.values())).dtype, torch.float32)  # bfloat16 (amp) -> float32
    sq_parts: list[torch.Tensor] = []  # [n] squared norms of the terms, added up below
    small: list[tuple[str, torch.Tensor]] = []  # (parameter name, per-example gradient [n, ...]), side by side
    # (parameter name, per-example tensor [n, ...] or closure (factors, finite rows or None) -> sum)
    large: list[tuple[str, object]] = []
    masses: list[torch.Tensor] = []  # [n] the Gram route's M_i, per layer taking it
    formed = formed or {}
    for i, ((module, a, _), b) in enumerate(zip(records, grads)):
        prefix = names[module] + "." if names[module] else ""
        a, b = a.to(acc), b.to(acc)
        if isinstance(module, nn.Linear):
            if a.dim() != 2:
                raise ValueError("ghost clipping supports Linear layers on [batch, features] inputs only")
            # float64 squares: a float32 square that underflows would be multiplied by the other factor
            sq_parts.append(a.double().pow(2).sum(1) * b.double().pow(2).sum(1))
            large.append((prefix + "weight", lambda c, keep, a=a, b=b: outer_sum(_kept(b, keep) * c[:, None],
                                                                                 _kept(a, keep))))
            if module.bias is not None:
                small.append((prefix + "bias", b))
        elif isinstance(module, nn.Conv2d):
            w_sq, weighted, mass = _conv_terms(module, a, b, live[prefix + "weight"].to(acc), conv_route,
                                               formed.get(i))
            sq_parts.append(w_sq)
            if mass is not None:
                masses.append(mass)
            large.append((prefix + "weight", weighted))
            if module.bias is not None:
                small.append((prefix + "bias", b.sum(dim=(2, 3))))
        else:  # GroupNorm: per-example gradients of the affine parameters, [n, C]
            xhat = F.group_norm(a, module.num_groups, None, None, module.eps)
            small += [(prefix + "weight", (xhat * b).flatten(2).sum(2)), (prefix + "bias", b.flatten(2).sum(2))]

    missing = set(params) - {name for name, _ in small + large}
    if missing:  # a layer that never ran: its parameters' share of the norms is unknown
        raise ValueError(f"ghost clipping saw no forward call of the layers holding {', '.join(sorted(missing))}")
    side = torch.cat([t.reshape(n, -1) for _, t in small], dim=1) if small else None
    if side is not None:
        sq_parts.append(squared_norms(side))
    sq = torch.stack(sq_parts).sum(0)  # float64: see privcore.roundoff
    # As in clip_and_sum: an example whose gradient is not finite (e.g. an overflow under autocast)
    # contributes zero; its activations and output gradients are zeroed too, since 0 * inf is NaN.
    norms = sq.sqrt()
    finite = torch.isfinite(norms)
    factor = clip_factors(norms, clip, acc, sum(p.numel() for p in params.values()))
    if masses:  # c_i M_i <= GRAM_CAP clip bounds the Gram route's summation error (privcore.roundoff)
        factor = torch.minimum(factor, (GRAM_CAP * clip / torch.stack(masses).sum(0).clamp_min(1e-300))
                               .clamp(max=1.0).to(acc))
    factor = torch.where(finite, factor, torch.zeros_like(factor))
    # On CUDA the mask is always applied (the same values when every example is finite): asking the
    # host whether all are finite would wait for the GPU in the middle of every step.
    keep = finite if device.type in SYNC_FREE_DEVICES or not bool(finite.all()) else None
    summed = {}
    for name, term in large:
        # float64 sums of float32 partial sums (privcore.roundoff): their rounding is bounded by sum_error
        value = term(factor, keep) if callable(term) else weighted_sum(factor, _kept(term, keep))
        summed[name] = value.to(params[name].dtype)
    if side is not None:
        pieces = weighted_sum(factor, _kept(side, keep)).split([math.prod(t.shape[1:]) for _, t in small])
        for (name, t), piece in zip(small, pieces):
            summed[name] = piece.view(t.shape[1:]).to(params[name].dtype)
    return {k: summed[k] for k in params}, norms.to(acc)
