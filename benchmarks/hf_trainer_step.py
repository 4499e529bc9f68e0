"""HuggingFace Trainer step time on npu vs CPU, side by side in one run.

    python benchmarks/hf_trainer_step.py [--steps N] [--pairs N]

Tiny GPT-2 (tied embeddings) and BERT built from configs (no downloads),
float32 and bfloat16 autocast, trained by transformers' Trainer exactly as a
user would. For each configuration, trials on the CPU and on npu alternate
(pairs), so that both see the same machine phase; a trial is the mean time of
one Trainer step over --steps steps after two warm-up steps (the time of
``trainer.training_step`` plus the optimizer step, read from the Trainer's
callbacks). Target: npu/cpu step time <= 1.0 (median over the pairs).

The figures depend on the machine running the simulator's device thread in
parallel with the host thread (two CPUs); benchmarks/machine_parallelism.py
tells whether it does (the run ends with its probe).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import torch_npu  # noqa: E402,F401

import transformers  # noqa: E402
from transformers import (  # noqa: E402
    BertConfig,
    BertForMaskedLM,
    GPT2Config,
    GPT2LMHeadModel,
    PrinterCallback,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

transformers.logging.set_verbosity_error()

VOCAB = 512
WARMUP = 2


def gpt2() -> torch.nn.Module:
    return GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                                      tie_word_embeddings=True))


def bert() -> torch.nn.Module:
    return BertForMaskedLM(BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=128, max_position_embeddings=64))


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int, length: int = 32):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(1, VOCAB, (n, length), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "attention_mask": torch.ones_like(self.ids[i]), "labels": self.ids[i]}


class StepClock(TrainerCallback):
    """Times each optimizer step from its begin to its end callback."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._start = 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if torch.npu.is_initialized():
            torch.npu.synchronize()
        self.times.append(time.perf_counter() - self._start)


def step_time(model_fn, device: str, precision: str, steps: int, tmp: Path) -> float:
    torch.manual_seed(0)
    model = model_fn()
    args = TrainingArguments(
        output_dir=str(tmp / f"{device}-{precision}"), per_device_train_batch_size=8, max_steps=WARMUP + steps,
        learning_rate=1e-3, use_cpu=device == "cpu", bf16=precision == "bf16", report_to=[],
        save_strategy="no", disable_tqdm=True, dataloader_num_workers=0, logging_strategy="no",
    )
    clock = StepClock()
    trainer = Trainer(model=model, args=args, train_dataset=Tokens(8 * (WARMUP + steps)), callbacks=[clock])
    trainer.remove_callback(PrinterCallback)  # it prints the run's summary
    trainer.train()
    return statistics.mean(clock.times[WARMUP:])


def machine_probe() -> str:
    probe = Path(__file__).with_name("machine_parallelism.py")
    out = subprocess.run([sys.executable, str(probe), "--samples", "50"], capture_output=True, text=True)
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    return lines[-1] if lines else out.stderr.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per trial")
    parser.add_argument("--pairs", type=int, default=5, help="alternating cpu/npu trials per configuration")
    args = parser.parse_args()
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / "torch_npu_hf_trainer_step"
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"torch_npu {torch_npu.__version__}, NPU_SIM_CHECKER={os.environ.get('NPU_SIM_CHECKER', '0')}")
    print(f"{'Trainer step':24s}{'cpu':>10s}{'npu':>10s}{'ratio':>8s}  pairs (npu/cpu)      target")
    for name, model_fn in (("gpt2", gpt2), ("bert", bert)):
        for precision in ("fp32", "bf16"):
            cpu_times, npu_times = [], []
            for _ in range(args.pairs):
                cpu_times.append(step_time(model_fn, "cpu", precision, args.steps, tmp))
                npu_times.append(step_time(model_fn, "npu", precision, args.steps, tmp))
            ratios = sorted(n / c for n, c in zip(npu_times, cpu_times))
            ratio = statistics.median(ratios)
            print(f"{name + ' ' + precision:24s}{statistics.median(cpu_times) * 1e3:8.2f}ms"
                  f"{statistics.median(npu_times) * 1e3:8.2f}ms{ratio:8.2f}  "
                  f"{min(ratios):.2f}..{max(ratios):.2f}           "
                  f"npu/cpu <= 1.0 {'ok' if ratio <= 1.0 else 'MISSED'}")
    print("machine after the run: " + machine_probe())


if __name__ == "__main__":
    main()
