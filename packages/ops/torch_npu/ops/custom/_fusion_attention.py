"""``npu_fusion_attention`` and ``npu_fusion_attention_grad``: fused
scaled-dot-product attention (FlashAttention) with Ascend's argument
conventions.

Computation, per batch ``b`` and query head ``n``::

    S   = scale * (Q @ K^T + pse)            # [Sq, Skv]
    S   = S masked to -inf where the mask is True
    P   = softmax(S)                         # rows with every key masked give 0
    P'  = dropout(P, keep_prob)              # keep with probability keep_prob, scale 1/keep_prob
    out = P' @ V

The forward also returns the row maximum and the row sum of ``exp(S - max)``
(``softmax_max``/``softmax_sum``, float32, repeated 8 times in the last
dimension as on Ascend), which the backward uses to recompute ``P`` without
storing it (``softmax_out`` is an empty tensor), and the ``seed``/``offset``
of the dropout mask, which the backward regenerates from them.

Heads of ``key``/``value`` may be fewer than those of ``query`` (GQA/MQA):
query head ``n`` attends with key/value head ``n // (N / N_kv)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ._common import check_floating, compute_dtype, sum_to
from ._schema import Args, SchemaOp

MAX_TOKENS = 2147483647
LAYOUTS = ("BSH", "SBH", "BSND", "BNSD", "TND")
#: Ascend keeps softmax_max/softmax_sum as [..., 8] (one 32-byte block).
_STAT_WIDTH = 8

# sparse_mode values (see npu_fusion_attention's docstring).
_DEFAULT_MASK, _ALL_MASK, _LEFT_UP_CAUSAL, _RIGHT_DOWN_CAUSAL, _BAND = 0, 1, 2, 3, 4
_PREFIX, _PREFIX_COMPRESS, _RIGHT_DOWN_CAUSAL_BAND, _BAND_LEFT_UP_CAUSAL = 5, 6, 7, 8
_SUPPORTED_SPARSE_MODES = (0, 1, 2, 3, 4, 5, 6)


# -- geometry ----------------------------------------------------------------


@dataclass
class _Geometry:
    """Sizes of one call. For "TND", ``batch`` is the number of sequences and
    ``q_bounds``/``kv_bounds`` their [start, end) token ranges."""

    layout: str
    batch: Any
    heads: Any
    kv_heads: Any
    q_len: Any  # Sq (max Sq for TND)
    kv_len: Any
    head_dim: Any
    v_head_dim: Any
    q_bounds: Optional[List[Tuple[int, int]]] = None
    kv_bounds: Optional[List[Tuple[int, int]]] = None

    @property
    def group(self) -> Any:
        return self.heads // self.kv_heads

    def numels(self) -> Any:
        """Elements of the dropout mask (``B * N * Sq * Skv``)."""
        if self.layout == "TND":
            total = 0
            for (qs, qe), (ks, ke) in zip(self.q_bounds, self.kv_bounds):
                total = total + (qe - qs) * (ke - ks)
            return self.heads * total
        return self.batch * self.heads * self.q_len * self.kv_len


def _bounds(name: str, cumulative: Optional[Sequence[int]], total: Any) -> List[Tuple[int, int]]:
    if cumulative is None or len(cumulative) == 0:
        raise ValueError(f"npu_fusion_attention: input_layout 'TND' needs {name}")
    out = []
    start = 0
    for end in cumulative:
        if end < start:
            raise ValueError(
                f"npu_fusion_attention: {name} must be cumulative (non-decreasing) "
                f"sequence lengths, got {list(cumulative)}"
            )
        out.append((start, end))
        start = end
    if start != total:
        raise ValueError(
            f"npu_fusion_attention: the last entry of {name} ({start}) must equal "
            f"the number of tokens T ({total})"
        )
    return out


def _geometry(args: Args) -> _Geometry:
    """The sizes of a call of either op (``args`` of npu_fusion_attention or
    npu_fusion_attention_grad: the arguments read here have the same names
    in both)."""
    query, key, value = args.query, args.key, args.value
    head_num, input_layout = args.head_num, args.input_layout
    if input_layout not in LAYOUTS:
        raise ValueError(
            f"npu_fusion_attention: input_layout must be one of {LAYOUTS}, got {input_layout!r}"
        )
    if head_num <= 0:
        raise ValueError(f"npu_fusion_attention: head_num must be positive, got {head_num}")
    want_dim = 3 if input_layout in ("BSH", "SBH", "TND") else 4
    for name, t in (("query", query), ("key", key), ("value", value)):
        check_floating("npu_fusion_attention", name, t)
        if t.dim() != want_dim:
            raise ValueError(
                f"npu_fusion_attention: {name} must have {want_dim} dimensions for "
                f"input_layout {input_layout!r}, got shape {tuple(t.shape)}"
            )
    if input_layout in ("BSH", "SBH"):
        if input_layout == "BSH":
            (b, sq, hq), (bk, skv, hk), (bv, sv, hv) = query.shape, key.shape, value.shape
        else:
            (sq, b, hq), (skv, bk, hk), (sv, bv, hv) = query.shape, key.shape, value.shape
        if hq % head_num != 0:
            raise ValueError(
                f"npu_fusion_attention: the hidden size of query ({hq}) must be a "
                f"multiple of head_num ({head_num})"
            )
        d = hq // head_num
        if hk % d != 0:
            raise ValueError(
                f"npu_fusion_attention: the hidden size of key ({hk}) must be a multiple "
                f"of the head dimension {d}"
            )
        nkv = hk // d
        if nkv == 0 or hv % nkv != 0:
            raise ValueError(
                f"npu_fusion_attention: the hidden size of value ({hv}) must be a "
                f"multiple of the number of key/value heads ({nkv})"
            )
        geom = _Geometry(input_layout, b, head_num, nkv, sq, skv, d, hv // nkv)
        batches, kv_lens = (bk, bv), (skv, sv)
    elif input_layout in ("BSND", "BNSD"):
        if input_layout == "BSND":
            (b, sq, n, d), (bk, skv, nkv, dk), (bv, sv, nv, dv) = query.shape, key.shape, value.shape
        else:
            (b, n, sq, d), (bk, nkv, skv, dk), (bv, nv, sv, dv) = query.shape, key.shape, value.shape
        if n != head_num:
            raise ValueError(
                f"npu_fusion_attention: query has {n} heads but head_num is {head_num}"
            )
        if dk != d or nv != nkv:
            raise ValueError(
                f"npu_fusion_attention: key {tuple(key.shape)} and value "
                f"{tuple(value.shape)} do not match query {tuple(query.shape)}"
            )
        geom = _Geometry(input_layout, b, n, nkv, sq, skv, d, dv)
        batches, kv_lens = (bk, bv), (skv, sv)
    else:  # TND
        (t, n, d), (tk, nkv, dk), (tv, nv, dv) = query.shape, key.shape, value.shape
        if n != head_num:
            raise ValueError(
                f"npu_fusion_attention: query has {n} heads but head_num is {head_num}"
            )
        if dk != d or nv != nkv or tv != tk:
            raise ValueError(
                f"npu_fusion_attention: key {tuple(key.shape)} and value "
                f"{tuple(value.shape)} do not match query {tuple(query.shape)}"
            )
        q_bounds = _bounds("actual_seq_qlen", args.actual_seq_qlen, t)
        kv_bounds = _bounds("actual_seq_kvlen", args.actual_seq_kvlen, tk)
        if len(q_bounds) != len(kv_bounds):
            raise ValueError(
                "npu_fusion_attention: actual_seq_qlen and actual_seq_kvlen must have "
                "the same length (the number of sequences)"
            )
        geom = _Geometry(
            input_layout,
            len(q_bounds),
            n,
            nkv,
            max(e - s for s, e in q_bounds),
            max(e - s for s, e in kv_bounds),
            d,
            dv,
            q_bounds,
            kv_bounds,
        )
        batches, kv_lens = (geom.batch, geom.batch), (tk, tv)
    if batches[0] != geom.batch or batches[1] != geom.batch or kv_lens[0] != kv_lens[1]:
        raise ValueError(
            f"npu_fusion_attention: query {tuple(query.shape)}, key {tuple(key.shape)} and "
            f"value {tuple(value.shape)} disagree on the batch size or key/value length"
        )
    if geom.heads % geom.kv_heads != 0:
        raise ValueError(
            f"npu_fusion_attention: the number of query heads ({geom.heads}) must be a "
            f"multiple of the number of key/value heads ({geom.kv_heads})"
        )
    return geom


def _to_bnsd(t: Tensor, layout: str, heads: Any) -> Tensor:
    """[B, N, S, D] view of ``t`` given in ``layout`` (not TND)."""
    if layout == "BNSD":
        return t
    if layout == "BSND":
        return t.permute(0, 2, 1, 3)
    if layout == "BSH":
        return t.unflatten(2, (heads, -1)).permute(0, 2, 1, 3)
    return t.unflatten(2, (heads, -1)).permute(1, 2, 0, 3)  # SBH


def _from_bnsd(t: Tensor, layout: str) -> Tensor:
    """The contiguous tensor in ``layout`` of ``t`` given as [B, N, S, D]."""
    if layout == "BNSD":
        return t.contiguous()
    if layout == "BSND":
        return t.permute(0, 2, 1, 3).contiguous()
    if layout == "BSH":
        return t.permute(0, 2, 1, 3).flatten(2).contiguous()
    return t.permute(2, 0, 1, 3).flatten(2).contiguous()  # SBH


def _out_shape(query: Tensor, geom: _Geometry) -> List[Any]:
    shape = list(query.shape)
    if geom.layout in ("BSH", "SBH"):
        shape[-1] = geom.heads * geom.v_head_dim
    else:
        shape[-1] = geom.v_head_dim
    return shape


def _stat_shape(geom: _Geometry, total_q: Any = None) -> List[Any]:
    if geom.layout == "TND":
        return [total_q, geom.heads, _STAT_WIDTH]
    return [geom.batch, geom.heads, geom.q_len, _STAT_WIDTH]


# -- masks ---------------------------------------------------------------------


def _check_options(args: Args) -> None:
    keep_prob, sparse_mode = args.keep_prob, args.sparse_mode
    if not 0.0 < keep_prob <= 1.0:
        raise ValueError(f"npu_fusion_attention: keep_prob must be in (0, 1], got {keep_prob}")
    if sparse_mode not in _SUPPORTED_SPARSE_MODES:
        if sparse_mode in (_RIGHT_DOWN_CAUSAL_BAND, _BAND_LEFT_UP_CAUSAL):
            raise NotImplementedError(
                f"npu_fusion_attention: sparse_mode {sparse_mode} (varlen split across "
                f"devices) is not implemented by torch-npu"
            )
        raise ValueError(f"npu_fusion_attention: invalid sparse_mode {sparse_mode}")
    if sparse_mode in (_PREFIX, _PREFIX_COMPRESS) and args.prefix is None:
        raise ValueError(f"npu_fusion_attention: sparse_mode {sparse_mode} needs prefix")


def _user_mask(atten_mask: Optional[Tensor], sq: int, skv: int, sliced: bool) -> Optional[Tensor]:
    if atten_mask is None:
        return None
    mask = atten_mask if atten_mask.dtype == torch.bool else atten_mask != 0
    if sliced:  # TND: one [S, S] mask shared by every sequence
        mask = mask[..., :sq, :skv]
    return mask


def _build_mask(
    args: Args,
    sq: int,
    skv: int,
    device: torch.device,
    batch_index: Optional[int] = None,
) -> Optional[Tensor]:
    """Boolean mask (True = masked out) broadcastable to [B, N, Sq, Skv], or
    None when nothing is masked, of the masking arguments of ``args`` (of
    either op). ``batch_index``: the sequence of a TND call."""
    atten_mask, sparse_mode, prefix = args.atten_mask, args.sparse_mode, args.prefix
    pre_tockens, next_tockens = args.pre_tockens, args.next_tockens
    tnd = batch_index is not None
    if sparse_mode == _ALL_MASK:
        return _user_mask(atten_mask, sq, skv, tnd)
    rows = torch.arange(sq, device=device).unsqueeze(-1)
    cols = torch.arange(skv, device=device)
    if sparse_mode == _DEFAULT_MASK:
        mask = _user_mask(atten_mask, sq, skv, tnd)
        if pre_tockens < MAX_TOKENS or next_tockens < MAX_TOKENS:
            diag = cols - rows  # key position relative to the query's, top-left aligned
            band = (diag > next_tockens) | (diag < -pre_tockens)
            mask = band if mask is None else mask | band
        return mask
    shift = skv - sq  # aligns the diagonal with the bottom-right corner
    if sparse_mode == _LEFT_UP_CAUSAL:
        return cols > rows
    if sparse_mode == _RIGHT_DOWN_CAUSAL:
        return cols > rows + shift
    if sparse_mode == _BAND:
        diag = cols - rows - shift
        return (diag > next_tockens) | (diag < -pre_tockens)
    # prefix modes: right-down causal, but the first prefix[b] keys are visible
    causal = cols > rows + shift
    if tnd:
        return causal & (cols >= int(prefix[batch_index]))
    visible = torch.tensor(list(prefix), device=device).view(-1, 1, 1, 1)
    return causal & (cols >= visible)


# -- dropout -------------------------------------------------------------------


def _default_generator(device: torch.device) -> torch.Generator:
    if device.type == "cpu":
        return torch.default_generator
    module = torch.get_device_module(device.type)
    index = device.index if device.index is not None else module.current_device()
    return module.default_generators[index]


def _draw_seed_offset(device: torch.device, numels: int) -> Tuple[int, int]:
    """Reserves ``numels`` random numbers of the device's default generator
    and returns the (seed, offset) that regenerate them."""
    gen = _default_generator(device)
    if device.type == "cpu":  # no counter-based generator: a fresh seed per call
        seed = int(torch.randint(0, 2**62, (1,), generator=gen).item())
        return seed, 0
    seed = gen.initial_seed() & (2**63 - 1)
    offset = gen.get_offset()
    gen.set_offset(offset + (numels + 3) // 4 * 4)
    return seed, offset


def dropout_keep_mask(
    seed: int, offset: int, numels: int, keep_prob: float, device: torch.device
) -> Tensor:
    """The flat dropout mask (True = kept) of ``numels`` elements that
    npu_fusion_attention with ``keep_prob`` drew at ``(seed, offset)``: its
    elements are the ``[B, N, Sq, Skv]`` mask in row-major order (for TND,
    the sequences' ``[N, Sq_i, Skv_i]`` masks one after the other)."""
    device = torch.device(device)
    gen = torch.Generator(device=device)
    if device.type == "cpu":  # not counter-based: fold the offset into the seed
        gen.manual_seed((seed + 0x9E3779B97F4A7C15 * (offset + 1)) & (2**63 - 1))
    else:
        gen.manual_seed(seed)
        gen.set_offset(offset)
    return torch.rand(numels, generator=gen, device=device) < keep_prob


# -- the math, on [B, N, S, D] blocks -------------------------------------------


def _expand_heads(t: Tensor, group: int) -> Tensor:
    return t if group == 1 else t.repeat_interleave(group, dim=1)


def _reduce_heads(t: Tensor, group: int) -> Tensor:
    return t if group == 1 else t.unflatten(1, (-1, group)).sum(2)


def _scores(
    q: Tensor, k: Tensor, pse: Optional[Tensor], scale: float, mask: Optional[Tensor]
) -> Tensor:
    s = torch.matmul(q, k.transpose(-1, -2))
    if pse is not None:
        s = s + pse.to(s.dtype)
    s = s * scale
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    return s


def _safe_max(s: Tensor) -> Tensor:
    m = s.amax(-1, keepdim=True)
    return m.masked_fill(m == float("-inf"), 0.0)  # rows with every key masked


def _probs(s: Tensor, m: Tensor, l: Tensor) -> Tensor:
    return torch.exp(s - m) / torch.where(l == 0, torch.ones_like(l), l)


def _forward_block(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    pse: Optional[Tensor],
    mask: Optional[Tensor],
    keep: Optional[Tensor],
    scale: float,
    keep_prob: float,
    ct: torch.dtype,
) -> Tuple[Tensor, Tensor, Tensor]:
    group = q.shape[1] // k.shape[1]
    s = _scores(q.to(ct), _expand_heads(k.to(ct), group), pse, scale, mask)
    m = _safe_max(s)
    l = torch.exp(s - m).sum(-1, keepdim=True)
    p = _probs(s, m, l)
    if keep is not None:
        p = p.masked_fill(~keep, 0.0) / keep_prob
    out = torch.matmul(p, _expand_heads(v.to(ct), group))
    return out, m, l


def _backward_block(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    dy: Tensor,
    pse: Optional[Tensor],
    mask: Optional[Tensor],
    keep: Optional[Tensor],
    m: Optional[Tensor],
    l: Optional[Tensor],
    scale: float,
    keep_prob: float,
    ct: torch.dtype,
) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """(dq, dk, dv, dS) with dS the gradient of ``Q @ K^T + pse`` ([B, N, Sq, Skv])."""
    group = q.shape[1] // k.shape[1]
    qf = q.to(ct)
    kf = _expand_heads(k.to(ct), group)
    vf = _expand_heads(v.to(ct), group)
    s = _scores(qf, kf, pse, scale, mask)
    if m is None or l is None:
        m = _safe_max(s)
        l = torch.exp(s - m).sum(-1, keepdim=True)
    p = _probs(s, m.to(ct), l.to(ct))
    dyf = dy.to(ct)
    dp = torch.matmul(dyf, vf.transpose(-1, -2))
    if keep is not None:
        p_dropped = p.masked_fill(~keep, 0.0) / keep_prob
        dp = dp.masked_fill(~keep, 0.0) / keep_prob
    else:
        p_dropped = p
    dv = torch.matmul(p_dropped.transpose(-1, -2), dyf)
    ds = p * (dp - (p * dp).sum(-1, keepdim=True)) * scale
    dq = torch.matmul(ds, kf)
    dk = torch.matmul(ds.transpose(-1, -2), qf)
    return dq, _reduce_heads(dk, group), _reduce_heads(dv, group), ds


def _tnd_block(t: Tensor, start: int, end: int) -> Tensor:
    """[1, N, S, D] view of tokens [start, end) of a TND tensor."""
    return t[start:end].permute(1, 0, 2).unsqueeze(0)


def _stat(t: Tensor) -> Tensor:
    """A [..., 1] statistic as Ascend's [..., 8]."""
    return t.expand(*t.shape[:-1], _STAT_WIDTH).contiguous()


# -- npu_fusion_attention ------------------------------------------------------


_FUSION_ATTENTION = SchemaOp(
    f"""npu_fusion_attention(
        Tensor query, Tensor key, Tensor value, SymInt head_num, str input_layout,
        Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None,
        float scale=1., float keep_prob=1.,
        SymInt pre_tockens={MAX_TOKENS}, SymInt next_tockens={MAX_TOKENS},
        SymInt inner_precise=0, SymInt[]? prefix=None,
        SymInt[]? actual_seq_qlen=None, SymInt[]? actual_seq_kvlen=None,
        SymInt sparse_mode=0, bool gen_mask_parallel=True, bool sync=False
    ) -> (Tensor, Tensor, Tensor, Tensor, SymInt, SymInt, SymInt)"""
)


@_FUSION_ATTENTION.register_kernel
def _fusion_attention(args: Args) -> Tuple[Tensor, Tensor, Tensor, Tensor, int, int, int]:
    geom = _geometry(args)
    _check_options(args)
    query, key, value, pse = args.query, args.key, args.value, args.pse
    scale, keep_prob = args.scale, args.keep_prob
    ct = compute_dtype(query.dtype, key.dtype, value.dtype)
    device = query.device
    numels = geom.numels()
    seed = offset = 0
    keep_flat = None
    if keep_prob < 1.0:
        seed, offset = _draw_seed_offset(device, numels)
        keep_flat = dropout_keep_mask(seed, offset, numels, keep_prob, device)

    if geom.layout != "TND":
        q = _to_bnsd(query, geom.layout, geom.heads)
        k = _to_bnsd(key, geom.layout, geom.kv_heads)
        v = _to_bnsd(value, geom.layout, geom.kv_heads)
        mask = _build_mask(args, geom.q_len, geom.kv_len, device)
        keep = None if keep_flat is None else keep_flat.view(
            geom.batch, geom.heads, geom.q_len, geom.kv_len
        )
        out, m, l = _forward_block(q, k, v, pse, mask, keep, scale, keep_prob, ct)
        out = _from_bnsd(out.to(query.dtype), geom.layout)
        softmax_max, softmax_sum = _stat(m), _stat(l)
    else:
        if pse is not None:
            raise NotImplementedError("npu_fusion_attention: pse with input_layout 'TND'")
        outs, maxes, sums = [], [], []
        used = 0
        for b, ((qs, qe), (ks, ke)) in enumerate(zip(geom.q_bounds, geom.kv_bounds)):
            sq, skv = qe - qs, ke - ks
            mask = _build_mask(args, sq, skv, device, b)
            keep = None
            if keep_flat is not None:
                size = geom.heads * sq * skv
                keep = keep_flat[used : used + size].view(1, geom.heads, sq, skv)
                used += size
            out, m, l = _forward_block(
                _tnd_block(query, qs, qe), _tnd_block(key, ks, ke), _tnd_block(value, ks, ke),
                None, mask, keep, scale, keep_prob, ct,
            )
            outs.append(out[0].permute(1, 0, 2))
            maxes.append(m[0].permute(1, 0, 2))
            sums.append(l[0].permute(1, 0, 2))
        out = torch.cat(outs).to(query.dtype).contiguous()
        softmax_max, softmax_sum = _stat(torch.cat(maxes)), _stat(torch.cat(sums))
    softmax_out = query.new_empty([0])
    return out, softmax_max, softmax_sum, softmax_out, seed, offset, numels


@_FUSION_ATTENTION.register_fake
def _fusion_attention_fake(args: Args) -> Tuple[Tensor, Tensor, Tensor, Tensor, Any, Any, Any]:
    geom = _geometry(args)
    _check_options(args)
    query = args.query
    ct = compute_dtype(query.dtype, args.key.dtype, args.value.dtype)
    seed = offset = 0
    if args.keep_prob < 1.0:
        # Data-dependent: drawn from the generator when the op runs. Under
        # torch.compile this is a graph break unless
        # torch._dynamo.config.capture_dynamic_output_shape_ops is True.
        ctx = torch.library.get_ctx()
        seed, offset = ctx.new_dynamic_size(), ctx.new_dynamic_size()
    stat_shape = _stat_shape(geom, query.shape[0])
    return (
        query.new_empty(_out_shape(query, geom)),
        query.new_empty(stat_shape, dtype=ct),
        query.new_empty(stat_shape, dtype=ct),
        query.new_empty([0]),
        seed,
        offset,
        geom.numels(),
    )


#: The non-tensor arguments (the options) of npu_fusion_attention. The
#: backward passes each to the npu_fusion_attention_grad argument of the same
#: name (``scale`` to ``scale_value``); the tensors it needs are saved.
_OPTIONS = _FUSION_ATTENTION.argument_names(tensors=False)


def _setup_context(ctx: Any, args: Args, output: Tuple[Any, ...]) -> None:
    out, softmax_max, softmax_sum, _softmax_out, seed, offset, numels = output
    ctx.save_for_backward(
        args.query, args.key, args.value, args.pse, args.atten_mask,
        out, softmax_max, softmax_sum,
    )
    ctx.options = {name: getattr(args, name) for name in _OPTIONS}
    ctx.seed, ctx.offset, ctx.numels = seed, offset, numels


def _backward(ctx: Any, grad_out: Tensor, *unused_grads: Any) -> Tuple[Any, ...]:
    query, key, value, pse, atten_mask, out, softmax_max, softmax_sum = ctx.saved_tensors
    grads = dict.fromkeys(_FUSION_ATTENTION.Args._fields)
    if grad_out is None:
        return tuple(grads.values())
    options = dict(ctx.options)
    options["scale_value"] = options.pop("scale")
    dq, dk, dv, dpse = torch.ops.npu.npu_fusion_attention_grad(
        query, key, value, grad_out,
        pse=pse,
        atten_mask=atten_mask,
        softmax_max=softmax_max,
        softmax_sum=softmax_sum,
        attention_in=out,
        seed=ctx.seed,
        offset=ctx.offset,
        numels=ctx.numels,
        **options,
    )
    grads["query"], grads["key"], grads["value"] = dq, dk, dv
    if pse is not None and ctx.needs_input_grad[_FUSION_ATTENTION.Args._fields.index("pse")]:
        grads["pse"] = dpse
    return tuple(grads.values())


_FUSION_ATTENTION.register_autograd(_backward, setup_context=_setup_context)


# -- npu_fusion_attention_grad -------------------------------------------------


_FUSION_ATTENTION_GRAD = SchemaOp(
    f"""npu_fusion_attention_grad(
        Tensor query, Tensor key, Tensor value, Tensor dy, SymInt head_num, str input_layout,
        Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None,
        Tensor? softmax_max=None, Tensor? softmax_sum=None, Tensor? softmax_in=None,
        Tensor? attention_in=None, float scale_value=1., float keep_prob=1.,
        SymInt pre_tockens={MAX_TOKENS}, SymInt next_tockens={MAX_TOKENS},
        SymInt inner_precise=0, SymInt seed=0, SymInt offset=0, SymInt numels=0,
        SymInt[]? prefix=None, SymInt[]? actual_seq_qlen=None, SymInt[]? actual_seq_kvlen=None,
        SymInt sparse_mode=0, bool gen_mask_parallel=True, bool sync=False
    ) -> (Tensor, Tensor, Tensor, Tensor)"""
)


@_FUSION_ATTENTION_GRAD.register_kernel
def _fusion_attention_grad(args: Args) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    geom = _geometry(args)
    _check_options(args)
    query, key, value, dy, pse = args.query, args.key, args.value, args.dy, args.pse
    scale, keep_prob = args.scale_value, args.keep_prob
    if tuple(dy.shape) != tuple(_out_shape(query, geom)):
        raise ValueError(
            f"npu_fusion_attention_grad: dy has shape {tuple(dy.shape)}, expected "
            f"{tuple(_out_shape(query, geom))}"
        )
    ct = compute_dtype(query.dtype, key.dtype, value.dtype)
    device = query.device
    keep_flat = None
    if keep_prob < 1.0:
        expected = geom.numels()
        if args.numels not in (0, expected):
            raise ValueError(
                f"npu_fusion_attention_grad: numels is {args.numels}, but the dropout mask "
                f"of these inputs has {expected} elements"
            )
        keep_flat = dropout_keep_mask(args.seed, args.offset, expected, keep_prob, device)
    softmax_max, softmax_sum = args.softmax_max, args.softmax_sum
    have_stats = softmax_max is not None and softmax_sum is not None
    if have_stats and softmax_max.numel() == 0:
        have_stats = False

    if geom.layout != "TND":
        q = _to_bnsd(query, geom.layout, geom.heads)
        k = _to_bnsd(key, geom.layout, geom.kv_heads)
        v = _to_bnsd(value, geom.layout, geom.kv_heads)
        d = _to_bnsd(dy, geom.layout, geom.heads)
        mask = _build_mask(args, geom.q_len, geom.kv_len, device)
        keep = None if keep_flat is None else keep_flat.view(
            geom.batch, geom.heads, geom.q_len, geom.kv_len
        )
        m = softmax_max[..., :1] if have_stats else None
        l = softmax_sum[..., :1] if have_stats else None
        dq, dk, dv, ds = _backward_block(
            q, k, v, d, pse, mask, keep, m, l, scale, keep_prob, ct
        )
        dq = _from_bnsd(dq.to(query.dtype), geom.layout)
        dk = _from_bnsd(dk.to(key.dtype), geom.layout)
        dv = _from_bnsd(dv.to(value.dtype), geom.layout)
        if pse is not None:
            dpse = sum_to(ds, pse.shape).to(pse.dtype).contiguous()
        else:
            dpse = query.new_empty([0])
        return dq, dk, dv, dpse

    if pse is not None:
        raise NotImplementedError("npu_fusion_attention_grad: pse with input_layout 'TND'")
    dq = torch.zeros(query.shape, dtype=ct, device=device)
    dk = torch.zeros(key.shape, dtype=ct, device=device)
    dv = torch.zeros(value.shape, dtype=ct, device=device)
    used = 0
    for b, ((qs, qe), (ks, ke)) in enumerate(zip(geom.q_bounds, geom.kv_bounds)):
        sq, skv = qe - qs, ke - ks
        mask = _build_mask(args, sq, skv, device, b)
        keep = None
        if keep_flat is not None:
            size = geom.heads * sq * skv
            keep = keep_flat[used : used + size].view(1, geom.heads, sq, skv)
            used += size
        m = _tnd_block(softmax_max[..., :1], qs, qe) if have_stats else None
        l = _tnd_block(softmax_sum[..., :1], qs, qe) if have_stats else None
        dq_b, dk_b, dv_b, _ = _backward_block(
            _tnd_block(query, qs, qe), _tnd_block(key, ks, ke), _tnd_block(value, ks, ke),
            _tnd_block(dy, qs, qe), None, mask, keep, m, l, scale, keep_prob, ct,
        )
        dq[qs:qe] = dq_b[0].permute(1, 0, 2)
        dk[ks:ke] = dk_b[0].permute(1, 0, 2)
        dv[ks:ke] = dv_b[0].permute(1, 0, 2)
    return (
        dq.to(query.dtype),
        dk.to(key.dtype),
        dv.to(value.dtype),
        query.new_empty([0]),
    )


@_FUSION_ATTENTION_GRAD.register_fake
def _fusion_attention_grad_fake(args: Args) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    _geometry(args)
    _check_options(args)
    query, pse = args.query, args.pse
    dpse = pse.new_empty(pse.shape) if pse is not None else query.new_empty([0])
    return (
        query.new_empty(query.shape),
        args.key.new_empty(args.key.shape),
        args.value.new_empty(args.value.shape),
        dpse,
    )


# -- public functions ------------------------------------------------------------


npu_fusion_attention = _FUSION_ATTENTION.python_function(
    __name__,
    """Fused attention: ``Dropout(Softmax(Mask(scale * (query @ key^T + pse),
    atten_mask)), keep_prob) @ value``.

    Args:
        query, key, value: float16/bfloat16/float32 tensors in ``input_layout``.
        head_num: the number of heads N of ``query``. ``key``/``value`` may
            have fewer heads (GQA/MQA) when N is a multiple of theirs; the head
            dimension of ``value`` may differ from that of query/key.
        input_layout: ``"BSH"`` ([B, S, N*D]), ``"SBH"`` ([S, B, N*D]),
            ``"BSND"``, ``"BNSD"`` or ``"TND"`` ([T, N, D]: the sequences of
            the batch packed one after the other, given by
            ``actual_seq_qlen``/``actual_seq_kvlen``).
        pse: position bias added to ``query @ key^T`` before scaling,
            broadcastable to [B, N, Sq, Skv] (not with TND). Differentiable.
        padding_mask: reserved (as on Ascend); ignored.
        atten_mask: bool or uint8 mask, True/1 = masked out (not attended),
            broadcastable to [B, N, Sq, Skv] (usually [Sq, Skv] or
            [B, 1, Sq, Skv]); with TND a [S, S] mask is cut to each sequence.
        scale: the scale of the scores (default 1.0, not 1/sqrt(D)).
        keep_prob: probability of keeping an attention weight (dropout
            ``1 - keep_prob``), in (0, 1].
        pre_tockens, next_tockens: the band of keys a query attends to:
            query i sees keys j with ``i - pre_tockens <= j <= i +
            next_tockens`` (sparse_mode 0: top-left aligned; 4: bottom-right).
        inner_precise: precision mode of the NPU kernel; ignored (the
            arithmetic always runs in float32).
        prefix: for sparse_mode 5/6, per batch the number of leading keys
            every query sees.
        actual_seq_qlen, actual_seq_kvlen: for TND, the cumulative sequence
            lengths of query and key/value, e.g. ``[2, 5, 9]`` for lengths
            2, 3, 4.
        sparse_mode: 0: ``atten_mask`` plus the pre/next_tockens band; 1: only
            ``atten_mask``; 2: causal, top-left aligned (``j > i`` masked);
            3: causal, bottom-right aligned (``j > i + Skv - Sq`` masked);
            4: band, bottom-right aligned; 5/6: prefix (causal bottom-right
            plus the first ``prefix[b]`` keys). For 2-6 the mask is computed
            and the contents of ``atten_mask`` are not used. 7 and 8 are not
            implemented.
        gen_mask_parallel, sync: scheduling of the NPU's dropout mask
            generation; ignored.

    Returns:
        ``(attention_out, softmax_max, softmax_sum, softmax_out, seed, offset,
        numels)``: ``attention_out`` in ``input_layout`` with value's head
        dimension; ``softmax_max``/``softmax_sum`` float32 [B, N, Sq, 8] (TND:
        [T, N, 8]): the row max of the scaled scores and the row sum of
        ``exp(scores - max)``; ``softmax_out`` an empty tensor; ``seed`` and
        ``offset`` of the dropout mask (0, 0 without dropout), drawn from the
        npu default generator (so ``torch.npu.manual_seed`` makes it
        reproducible); ``numels`` the number of elements of the dropout mask
        (B*N*Sq*Skv). Query rows whose keys are all masked give 0.

    Differentiable in ``query``, ``key``, ``value`` and ``pse`` through
    ``attention_out``; the backward is :func:`npu_fusion_attention_grad`.
    """,
)


npu_fusion_attention_grad = _FUSION_ATTENTION_GRAD.python_function(
    __name__,
    """The backward of :func:`npu_fusion_attention`.

    Takes the forward's inputs and options (``scale_value`` is its
    ``scale``), the gradient ``dy`` of ``attention_out``, and what the forward
    returned: ``softmax_max``/``softmax_sum`` (recomputed when None),
    ``attention_in`` (its ``attention_out``; accepted but not needed) and
    ``seed``/``offset``/``numels`` (which regenerate the dropout mask when
    ``keep_prob < 1``). ``softmax_in`` and ``padding_mask`` are ignored.

    Returns:
        ``(dq, dk, dv, dpse)``, of the shapes of query, key, value and pse
        (an empty tensor when ``pse`` is None).
    """,
)
