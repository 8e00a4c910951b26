"""The mixture's forward cost on CPU: routed top-1 against one LoRA, against mixing every expert
densely, and against peft's X-LoRA on the same adapters.

    python benchmarks/moe_forward.py [--hidden 576] [--layers 4] [--tokens 2048] [--rank 16] [--experts 4]
                                     [--threads 2] [--repeats 5]

A llama of the given shape (random weights) and `--experts` adapters of rank `--rank` on
q,k,v,o,gate,up,down (random A and B). Gates with random weights spread the tokens over the
experts and the base. Forward passes of one sequence of `--tokens` tokens without gradient,
best of `--repeats`. Printed in one run:

- whole model, routed top-1 / the same model with one peft LoRA (goal: at most 1.15);
- the adapter part alone (every adapted module's LoRA deltas with the gating: routed top-1,
  each expert on its own tokens, against every expert on every token weighted by the gate's
  probabilities; the base matmuls excluded) (goal: at most 0.4);
- whole model, routed top-1 / peft's X-LoRA over the same adapters (goal: at most 0.6).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def best(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hidden", type=int, default=576)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--experts", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from trace_gym.moe.mixture import Mixture, RoutedLoRALinear

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=args.hidden, intermediate_size=int(args.hidden * 8 / 3) // 64 * 64,
                         num_hidden_layers=args.layers, num_attention_heads=max(1, args.hidden // 64),
                         num_key_value_heads=max(1, args.hidden // 192), vocab_size=49152, tie_word_embeddings=True)
    with tempfile.TemporaryDirectory() as tmp:
        base_dir = Path(tmp) / "base"
        LlamaForCausalLM(config).save_pretrained(base_dir)

        def base_model():
            return LlamaForCausalLM.from_pretrained(base_dir, dtype=torch.float32, use_kernels=False).eval()

        adapters = []
        for e in range(args.experts):
            torch.manual_seed(100 + e)
            peft = get_peft_model(base_model(), LoraConfig(r=args.rank, lora_alpha=args.rank, target_modules=TARGETS,
                                                           init_lora_weights=False))
            path = Path(tmp) / f"expert{e}"
            peft.save_pretrained(path)
            adapters.append(path)
        ids = torch.randint(0, config.vocab_size, (1, args.tokens))
        print(f"llama hidden {args.hidden}, {args.layers} layers, {args.tokens} tokens, rank {args.rank}, "
              f"{args.experts} experts, {args.threads} threads (load {os.getloadavg()[0]:.2f})", flush=True)

        single = PeftModel.from_pretrained(base_model(), str(adapters[0])).eval()
        mixture = Mixture.from_dirs(base_model(), adapters)
        generator = torch.Generator().manual_seed(1)
        for gate in mixture.gates:  # spread the tokens over the base and every expert
            torch.nn.init.normal_(gate.linear.weight, std=1.0, generator=generator)
            gate.linear.bias.data.zero_()
        with torch.no_grad():
            t_single = best(lambda: single(ids), args.repeats)
            t_routed = best(lambda: mixture.model(ids), args.repeats)
            shares = torch.bincount(mixture.routes[0].logits.argmax(-1), minlength=args.experts + 1).float()
            print(f"tokens per slot in layer 0 (base first): {shares.int().tolist()}")
            print(f"whole model: routed top-1 {t_routed * 1000:.0f} ms, one LoRA {t_single * 1000:.0f} ms, "
                  f"ratio {t_routed / t_single:.3f} (goal <= 1.15)", flush=True)

            # the adapter part alone, module by module, with the routing the gates made
            modules = [m for m in mixture.model.modules() if isinstance(m, RoutedLoRALinear)]
            inputs: dict[int, torch.Tensor] = {}
            hooks = [m.register_forward_hook(lambda mod, i, o: inputs.__setitem__(id(mod), i[0].reshape(-1, i[0].shape[-1])))
                     for m in modules]
            mixture.model(ids)
            for h in hooks:
                h.remove()
            routes = {id(m): (m.route.index, torch.softmax(m.route.logits, -1)) for m in modules}

            def routed_deltas():
                for m in modules:
                    x, (index, _) = inputs[id(m)], routes[id(m)]
                    y = x.new_zeros(x.shape[0], m.base.out_features)
                    for e in m.experts:
                        if len(index[e]):
                            y.index_add_(0, index[e], m.delta(e, x[index[e]]))

            def dense_deltas():
                for m in modules:
                    x, (_, probs) = inputs[id(m)], routes[id(m)]
                    sum(probs[:, e + 1: e + 2] * m.delta(e, x) for e in m.experts)

            t_r, t_d = best(routed_deltas, args.repeats), best(dense_deltas, args.repeats)
            print(f"adapter part alone: routed {t_r * 1000:.0f} ms, dense mixing of every expert {t_d * 1000:.0f} ms, "
                  f"ratio {t_r / t_d:.3f} (goal <= 0.4)", flush=True)

            from peft import XLoraConfig

            xbase = base_model()
            xbase.config.use_cache = False  # X-LoRA requires it
            xlora = get_peft_model(xbase, XLoraConfig(
                task_type="CAUSAL_LM", hidden_size=args.hidden, xlora_depth=1,
                # named 0..N-1: X-LoRA loads its experts under those names whatever the keys say
                adapters={str(e): str(p) for e, p in enumerate(adapters)})).eval()
            t_x = best(lambda: xlora(input_ids=ids, use_cache=False), args.repeats)
            print(f"whole model: routed top-1 {t_routed * 1000:.0f} ms, peft X-LoRA {t_x * 1000:.0f} ms, ratio "
                  f"{t_routed / t_x:.3f} (goal <= 0.6)  (load {os.getloadavg()[0]:.2f})", flush=True)


if __name__ == "__main__":
    main()
