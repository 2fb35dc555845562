#!/usr/bin/env python3
"""synth_hf_checkpoint.py OUT_DIR [--dtype F16|BF16] [--layers N] ...

Writes a LLaMA-architecture Hugging Face checkpoint with seeded random
weights, TinyLlama-1.1B-sized by default (hidden 2048, 22 layers, 32 heads,
4 kv heads, ffn 5632, vocab 32000; about 2.2 GB in F16), for measuring
`ember convert` on a real-sized model (bench/convert_tinyllama.sh). The
tokenizer is the golden llama one (../shared/golden/llama/hf), padded by the
converter to the vocabulary size. Tensors are generated and written one at a
time, so the script itself needs only about one tensor of memory.
"""
import argparse
import json
import os
import shutil
import struct

import numpy as np


def tensors(a):
    h, f, v = a.hidden, a.ffn, a.vocab
    hd = h // a.heads
    kv = a.kv_heads * hd
    out = {'lm_head.weight': (v, h), 'model.embed_tokens.weight': (v, h), 'model.norm.weight': (h,)}
    for l in range(a.layers):
        p = 'model.layers.%d.' % l
        out[p + 'input_layernorm.weight'] = (h,)
        out[p + 'post_attention_layernorm.weight'] = (h,)
        out[p + 'self_attn.q_proj.weight'] = (h, h)
        out[p + 'self_attn.k_proj.weight'] = (kv, h)
        out[p + 'self_attn.v_proj.weight'] = (kv, h)
        out[p + 'self_attn.o_proj.weight'] = (h, h)
        out[p + 'mlp.gate_proj.weight'] = (f, h)
        out[p + 'mlp.up_proj.weight'] = (f, h)
        out[p + 'mlp.down_proj.weight'] = (h, f)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out')
    ap.add_argument('--dtype', default='F16', choices=['F16', 'BF16', 'F32'])
    ap.add_argument('--hidden', type=int, default=2048)
    ap.add_argument('--layers', type=int, default=22)
    ap.add_argument('--heads', type=int, default=32)
    ap.add_argument('--kv-heads', type=int, default=4)
    ap.add_argument('--ffn', type=int, default=5632)
    ap.add_argument('--vocab', type=int, default=32000)
    ap.add_argument('--seed', type=int, default=1234)
    ap.add_argument('--golden', default=os.path.join(os.path.dirname(__file__), '..', '..',
                                                     'shared', 'golden', 'llama', 'hf'))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    config = {
        'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'hidden_act': 'silu',
        'hidden_size': a.hidden, 'intermediate_size': a.ffn, 'num_hidden_layers': a.layers,
        'num_attention_heads': a.heads, 'num_key_value_heads': a.kv_heads,
        'vocab_size': a.vocab, 'max_position_embeddings': 2048, 'rms_norm_eps': 1e-5,
        'rope_theta': 10000.0, 'tie_word_embeddings': False, 'bos_token_id': 1,
        'eos_token_id': 2, 'torch_dtype': {'F16': 'float16', 'BF16': 'bfloat16',
                                           'F32': 'float32'}[a.dtype],
    }
    with open(os.path.join(a.out, 'config.json'), 'w') as f:
        json.dump(config, f, indent=2)
    for name in ('tokenizer.model', 'tokenizer_config.json', 'generation_config.json'):
        shutil.copyfile(os.path.join(a.golden, name), os.path.join(a.out, name))
        os.chmod(os.path.join(a.out, name), 0o644)

    size = {'F16': 2, 'BF16': 2, 'F32': 4}[a.dtype]
    shapes = tensors(a)
    header, off = {}, 0
    for name in sorted(shapes):
        n = int(np.prod(shapes[name])) * size
        header[name] = {'dtype': a.dtype, 'shape': list(shapes[name]), 'data_offsets': [off, off + n]}
        off += n
    hjson = json.dumps(header, separators=(',', ':')).encode()
    hjson += b' ' * (-len(hjson) % 8)
    rng = np.random.default_rng(a.seed)
    with open(os.path.join(a.out, 'model.safetensors'), 'wb') as f:
        f.write(struct.pack('<Q', len(hjson)))
        f.write(hjson)
        for name in sorted(shapes):
            shape = shapes[name]
            if len(shape) == 1:
                x = 1.0 + 0.02 * rng.standard_normal(shape, dtype=np.float32)
            else:
                x = 0.02 * rng.standard_normal(shape, dtype=np.float32)
            if a.dtype == 'F16':
                f.write(x.astype(np.float16).tobytes())
            elif a.dtype == 'BF16':
                u = x.view(np.uint32)
                f.write(((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint16).tobytes())
            else:
                f.write(x.tobytes())
            del x
    print('%s: %d tensors, %.2f GB of %s' % (a.out, len(shapes), off / 1e9, a.dtype))


if __name__ == '__main__':
    main()
