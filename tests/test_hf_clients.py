"""The clients users bring: HuggingFace transformers' Trainer and accelerate,
on tiny models built from configs (no downloads), train on npu exactly as on
the CPU.

Every run is compared with the same run on the CPU, step by step:
- float32: the losses are equal (npu runs the CPU's kernels);
- bfloat16 autocast: within the spread of bfloat16 rounding (npu autocasts
  with CUDA's op lists, the CPU with its own, so single ops round
  differently);
- float16 with a GradScaler (the CPU has no float16 autocast in Trainer and
  accelerate, so against the CPU's float32 run).
Dropout draws from each device's own generator (as on any two devices), so
runs compared with the CPU have dropout off; the runs with dropout check
what dropout must keep: gradient checkpointing recomputes the forward pass
with the same random numbers (its loss and gradients equal the run without
checkpointing).

transformers and accelerate are test requirements (./dev installs them);
./dev test runs this file in the default row only, like the OpInfo sweep.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch_npu  # noqa: F401

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import transformers  # noqa: E402
from transformers import (  # noqa: E402
    BertConfig,
    BertForMaskedLM,
    GPT2Config,
    GPT2LMHeadModel,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

transformers.logging.set_verbosity_error()

STEPS = 6
VOCAB = 96
BF16_LOSS_TOLERANCE = 2e-3  # bfloat16 keeps 8 bits: ~4e-3 relative per rounding
FP16_LOSS_TOLERANCE = 2e-4


def gpt2(dropout: float = 0.0) -> GPT2LMHeadModel:
    config = GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                        resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
                        tie_word_embeddings=True)
    return GPT2LMHeadModel(config)


def bert(dropout: float = 0.0) -> BertForMaskedLM:
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32,
                        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    return BertForMaskedLM(config)


MODELS = {"gpt2": gpt2, "bert": bert}


class TokenData(torch.utils.data.Dataset):
    def __init__(self, n: int = 24, length: int = 16):
        g = torch.Generator().manual_seed(1)
        self.ids = torch.randint(1, VOCAB, (n, length), generator=g)
        self.mask = torch.ones_like(self.ids)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "attention_mask": self.mask[i], "labels": self.ids[i]}


class LossLog(TrainerCallback):
    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.losses.append(float(logs["loss"]))


def train_with_trainer(model_name: str, device: str, precision: str = "fp32", *, dropout: float = 0.0,
                       checkpointing: bool = False, optim: str = "adamw_torch", seed: int = 0,
                       tmp_path=None, per_device_batch: int = 4) -> tuple[list[float], torch.nn.Module]:
    torch.manual_seed(seed)
    model = MODELS[model_name](dropout)
    args = TrainingArguments(
        output_dir=str(tmp_path / f"{model_name}-{device}-{precision}"), per_device_train_batch_size=per_device_batch,
        max_steps=STEPS, logging_steps=1, learning_rate=2e-3, seed=seed, data_seed=seed,
        use_cpu=device == "cpu", bf16=precision == "bf16", fp16=precision == "fp16",
        activation_checkpointing=checkpointing, optim=optim, report_to=[], save_strategy="no",
        disable_tqdm=True, dataloader_num_workers=0, logging_nan_inf_filter=False,
    )
    log = LossLog()
    trainer = Trainer(model=model, args=args, train_dataset=TokenData(), callbacks=[log])
    trainer.train()
    assert str(trainer.args.device).startswith(device)
    assert len(log.losses) == STEPS
    return log.losses, model


def assert_close_losses(npu: list[float], cpu: list[float], tolerance: float) -> None:
    assert len(npu) == len(cpu)
    for step, (a, b) in enumerate(zip(npu, cpu)):
        assert math.isfinite(a) and abs(a - b) <= tolerance * max(1.0, abs(b)), (step, npu, cpu)


# -- Trainer ---------------------------------------------------------------------------------


@pytest.mark.parametrize("model_name", ["gpt2", "bert"])
def test_trainer_fp32_trains_exactly_as_on_cpu(model_name, tmp_path):
    cpu, _ = train_with_trainer(model_name, "cpu", tmp_path=tmp_path)
    npu, model = train_with_trainer(model_name, "npu", tmp_path=tmp_path)
    assert npu == cpu
    assert all(p.device.type == "npu" for p in model.parameters())
    if model_name == "gpt2":  # tied weights stayed tied through Trainer's .to("npu")
        assert model.lm_head.weight is model.transformer.wte.weight


@pytest.mark.parametrize("model_name", ["gpt2", "bert"])
def test_trainer_bf16_follows_cpu_autocast(model_name, tmp_path):
    cpu, _ = train_with_trainer(model_name, "cpu", "bf16", tmp_path=tmp_path)
    npu, _ = train_with_trainer(model_name, "npu", "bf16", tmp_path=tmp_path)
    assert_close_losses(npu, cpu, BF16_LOSS_TOLERANCE)


@pytest.mark.parametrize("model_name", ["gpt2", "bert"])
def test_trainer_fp16_with_grad_scaler(model_name, tmp_path):
    cpu, _ = train_with_trainer(model_name, "cpu", "fp32", tmp_path=tmp_path)
    npu, _ = train_with_trainer(model_name, "npu", "fp16", tmp_path=tmp_path)
    assert_close_losses(npu, cpu, FP16_LOSS_TOLERANCE)


@pytest.mark.parametrize("model_name", ["gpt2", "bert"])
def test_gradient_checkpointing_recomputes_dropout_exactly(model_name, tmp_path):
    plain, _ = train_with_trainer(model_name, "npu", dropout=0.1, tmp_path=tmp_path)
    checkpointed, _ = train_with_trainer(model_name, "npu", dropout=0.1, checkpointing=True, tmp_path=tmp_path)
    assert checkpointed == plain
    # dropout is active: another seed gives other masks, hence other losses
    other_seed, _ = train_with_trainer(model_name, "npu", dropout=0.1, seed=1, tmp_path=tmp_path)
    assert other_seed != plain


def test_trainer_with_torch_npu_fused_adamw(tmp_path):
    reference, _ = train_with_trainer("gpt2", "npu", optim="adamw_torch", tmp_path=tmp_path)
    fused, _ = train_with_trainer("gpt2", "npu", optim="adamw_torch_npu_fused", tmp_path=tmp_path)
    assert fused == reference


# One rank of a `torchrun --nproc-per-node 2` job: Trainer picks the hccl
# backend itself (transformers and accelerate know npu); each rank takes half
# of the 4-row batch of the single-process run.
TRAINER_RANK = """\
import json, os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import torch.distributed as dist
from test_hf_clients import train_with_trainer

out, precision = Path(sys.argv[2]), sys.argv[3]
losses, model = train_with_trainer("gpt2", "npu", precision, tmp_path=out, per_device_batch=2)
result = {"backend": dist.get_backend(), "world": dist.get_world_size(), "losses": losses,
          "device": str(next(model.parameters()).device)}
(out / f"rank{os.environ['RANK']}.json").write_text(json.dumps(result))
"""


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_trainer_on_two_torchrun_ranks_follows_one_process(precision, tmp_path):
    script = tmp_path / "trainer_rank.py"
    script.write_text(TRAINER_RANK)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           str(script), str(Path(__file__).parent), str(tmp_path), precision],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    single, _ = train_with_trainer("gpt2", "npu", precision, tmp_path=tmp_path)
    results = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)]
    for rank, result in enumerate(results):
        assert (result["backend"], result["world"], result["device"]) == ("hccl", 2, f"npu:{rank}")
        # Trainer logs the mean of the ranks' losses: the whole batch's loss,
        # up to the order of float32 sums (bfloat16: its rounding spread).
        assert_close_losses(result["losses"], single, 1e-5 if precision == "fp32" else BF16_LOSS_TOLERANCE)
    assert results[0]["losses"] == results[1]["losses"]


# -- accelerate ------------------------------------------------------------------------------


def train_with_accelerate(device: str, precision: str, optimizer_first: bool) -> list[float]:
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    torch.manual_seed(0)
    model = gpt2()
    accelerator = Accelerator(mixed_precision=precision, cpu=device == "cpu")
    if optimizer_first:  # accelerate's documented order: optimizer before prepare
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
        model, optimizer = accelerator.prepare(model, optimizer)
    else:
        model = accelerator.prepare(model)
        optimizer = accelerator.prepare(torch.optim.AdamW(model.parameters(), lr=2e-3))
    assert accelerator.device.type == device
    data = TokenData()
    # One batch, again and again: the loss must fall if the optimizer steps
    # the model's (moved) parameters.
    batch = {"input_ids": data.ids[:4].to(accelerator.device), "attention_mask": data.mask[:4].to(accelerator.device)}
    losses = []
    for _ in range(STEPS):
        with accelerator.autocast():
            loss = model(**batch, labels=batch["input_ids"]).loss
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("optimizer_first", [True, False], ids=["optimizer-before-prepare", "optimizer-after"])
@pytest.mark.parametrize("precision", ["no", "bf16", "fp16"])
def test_accelerate_loop_trains_as_on_cpu(precision, optimizer_first):
    cpu_precision = "no" if precision == "fp16" else precision  # no fp16 autocast on the CPU
    cpu = train_with_accelerate("cpu", cpu_precision, optimizer_first)
    npu = train_with_accelerate("npu", precision, optimizer_first)
    if precision == "no":
        assert npu == cpu
    else:
        assert_close_losses(npu, cpu, BF16_LOSS_TOLERANCE if precision == "bf16" else FP16_LOSS_TOLERANCE)
    assert npu[-1] < npu[0]  # the model trained (the optimizer holds the moved parameters)


# -- inference -------------------------------------------------------------------------------


def test_generate_equals_cpu():
    torch.manual_seed(0)
    model = gpt2().eval()
    prompt = torch.tensor([[5, 17, 33, 2]])
    cpu = model.generate(prompt, max_new_tokens=12, do_sample=False, pad_token_id=0)
    model.to("npu")
    npu = model.generate(prompt.npu(), max_new_tokens=12, do_sample=False, pad_token_id=0)
    assert npu.device.type == "npu"
    assert torch.equal(npu.cpu(), cpu)


def test_a_training_step_warns_about_nothing(tmp_path, capfd):
    # Correct user code must not warn: neither Python warnings nor C++
    # warnings of device work (mse_loss's backward printed one every step).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 1)).npu()
        optimizer = torch.optim.AdamW(model.parameters())
        x, y = torch.randn(16, 8, device="npu"), torch.randn(16, 1, device="npu")
        for loss_fn in (torch.nn.functional.mse_loss, torch.nn.functional.l1_loss,
                        torch.nn.functional.smooth_l1_loss, torch.nn.functional.huber_loss):
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        torch.npu.synchronize()
    assert [str(w.message) for w in caught] == []
    assert "Warning" not in capfd.readouterr().err


# -- torch.compile ---------------------------------------------------------------------------


def llama() -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                         attn_implementation="sdpa")
    return LlamaForCausalLM(config)


def train_language_model(make, ids: torch.Tensor, device: str, compiled: bool, steps: int) -> list[float]:
    """Losses of ``steps`` AdamW steps of ``make()`` on ``ids`` (inputs and
    labels), the model compiled or eager; seeded the same for every call."""
    torch.manual_seed(0)
    model = make().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    step = torch.compile(model) if compiled else model
    batch = ids.to(device)
    losses = []
    for _ in range(steps):
        loss = step(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("model_name", ["llama", "bert", "gpt2"])
def test_compiled_training_follows_eager(model_name):
    # torch.compile of a language model's training step on npu (the graph
    # plugin): SDPA's backward (Note [Layout copies]), the embedding's
    # backward (Note [Scatters run as extern kernels]), attention masks and
    # cross-entropy (Note [Bool buffers of a kernel in bytes]: compiled BERT
    # trained to losses of 0.02 for 4.58 without it), GPT-2's split of its
    # fused qkv projection all compile, and the
    # losses follow eager npu's step by step. Kernels MLIR cannot build run
    # their aten ops eagerly with a warning, which is allowed.
    make = {"llama": llama, "bert": lambda: bert(0.0), "gpt2": lambda: gpt2(0.0)}[model_name]
    ids = torch.randint(1, VOCAB, (2, 16), generator=torch.Generator().manual_seed(2))
    torch._dynamo.reset()
    eager = train_language_model(make, ids, "npu", False, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NPUKernelFallbackWarning: documented, allowed here
        compiled = train_language_model(make, ids, "npu", True, 4)
    torch._dynamo.reset()
    assert_close_losses(compiled, eager, 1e-5)
    assert compiled[-1] < compiled[0]


@pytest.mark.parametrize("model_name", ["gpt2", "deepseek_v3"])
def test_compiled_training_with_gradient_checkpointing_follows_eager(model_name):
    # transformers' gradient_checkpointing_enable() under torch.compile, where
    # the backward recomputes each checkpointed layer. Both failed to compile:
    # - GPT-2's attention (scaled_dot_product_attention with a mask) is a
    #   random op to AOTAutograd, run through its rng-state operators, which
    #   PyTorch implements for cpu, cuda, hpu and xpu only ("Backend not
    #   supported for npu"; Note [Random ops recomputed by checkpointing]);
    # - DeepSeek-V3's recomputed attention probabilities reach its softmax
    #   backward through the buffer of an expand to their own shape (Note
    #   [Reads of a value under an identity view]).
    def make():
        model = gpt2(0.0) if model_name == "gpt2" else deepseek_v3()
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return model.train()

    ids = torch.randint(1, VOCAB, (4, 16), generator=torch.Generator().manual_seed(2))
    compiled = assert_compiled_training_follows_eager(make, ids, 3)
    assert compiled[-1] < compiled[0]


def assert_compiled_training_follows_eager(make, ids: torch.Tensor, steps: int) -> list[float]:
    """Trains ``make()`` eagerly and compiled on npu; the losses agree within
    1e-5 and no kernel falls back. Returns the compiled losses."""
    from torch_npu.graph.compile.kernel import NPUKernelFallbackWarning

    torch._dynamo.reset()
    eager = train_language_model(make, ids, "npu", False, steps)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NPUKernelFallbackWarning)
        compiled = train_language_model(make, ids, "npu", True, steps)
    torch._dynamo.reset()
    assert_close_losses(compiled, eager, 1e-5)
    return compiled


def test_compiled_inference_with_padding_follows_eager():
    # A compiled Llama serving padded batches of changing length
    # and greedy generation: the rotary embedding, grouped-query expand and
    # padding mask make attention inputs of one shape, told apart by
    # position (Note [Extern kernel inputs told apart by position]); every
    # compiled forward failed before. Every kernel compiles: no fallback.
    from torch_npu.graph.compile.kernel import NPUKernelFallbackWarning

    torch.manual_seed(0)
    model = llama().npu().eval()
    compiled = torch.compile(model)
    torch._dynamo.reset()
    generator = torch.Generator().manual_seed(3)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("error", NPUKernelFallbackWarning)
        for length in (7, 12):
            ids = torch.randint(1, VOCAB, (2, length), generator=generator).npu()
            mask = torch.ones_like(ids)
            mask[1, :3] = 0
            eager = model(input_ids=ids, attention_mask=mask).logits
            torch.testing.assert_close(compiled(input_ids=ids, attention_mask=mask).logits, eager,
                                       atol=1e-5, rtol=1e-5)
        prompt = ids[:1, :5]
        expected = model.generate(prompt, max_new_tokens=4, do_sample=False)
        model.forward = torch.compile(model.forward)
        assert torch.equal(model.generate(prompt, max_new_tokens=4, do_sample=False), expected)
    torch._dynamo.reset()


def mixtral() -> torch.nn.Module:
    from transformers import MixtralConfig, MixtralForCausalLM

    config = MixtralConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                           num_experts_per_tok=2, max_position_embeddings=32)
    return MixtralForCausalLM(config)


def test_mixture_of_experts_trains_as_on_cpu_eager_and_compiled():
    # transformers' grouped MoE experts count the tokens per expert with
    # torch.histc of int32 expert ids on every device but the CPU, as CUDA
    # allows (csrc/HistogramKernels.cpp in torch-npu-ops); npu refused
    # integers in eager and while tracing for torch.compile. Eager npu trains
    # to the CPU's losses exactly (the CPU counts float ids), and the compiled
    # step follows eager with every kernel compiled.
    from torch_npu.graph.compile.kernel import NPUKernelFallbackWarning

    ids = torch.randint(1, VOCAB, (2, 16), generator=torch.Generator().manual_seed(4))
    torch._dynamo.reset()
    cpu = train_language_model(mixtral, ids, "cpu", False, 3)
    eager = train_language_model(mixtral, ids, "npu", False, 3)
    assert eager == cpu
    with warnings.catch_warnings():
        warnings.simplefilter("error", NPUKernelFallbackWarning)
        compiled = train_language_model(mixtral, ids, "npu", True, 3)
    torch._dynamo.reset()
    assert_close_losses(compiled, eager, 1e-5)
    assert compiled[-1] < compiled[0]


def deepseek_v3() -> torch.nn.Module:
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    config = DeepseekV3Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
                              num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4,
                              num_experts_per_tok=2, n_group=1, topk_group=1, first_k_dense_replace=1,
                              q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8,
                              v_head_dim=8, max_position_embeddings=32)
    return DeepseekV3ForCausalLM(config)


def mamba() -> torch.nn.Module:
    from transformers import MambaConfig, MambaForCausalLM

    return MambaForCausalLM(MambaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, state_size=8))


@pytest.mark.parametrize("model_name", ["deepseek_v3", "mamba"])
def test_compiled_training_of_more_architectures_follows_eager(model_name):
    # Two graphs no other test makes, each failed to compile on npu:
    # DeepSeek-V3's key assembly (key[..., :n].copy_(k_nope)) has a backward
    # that copies into a fresh new_empty_strided (Note [Empty values a group
    # does not read]); Mamba's backward concatenates a matmul with two
    # reductions (Note [Pieces of a concatenation]).
    make = {"deepseek_v3": deepseek_v3, "mamba": mamba}[model_name]
    ids = torch.randint(1, VOCAB, (2, 16), generator=torch.Generator().manual_seed(5))
    assert_compiled_training_follows_eager(make, ids, 2)
