"""An exact float64 Llama forward in numpy, over weights decoded by the PyPI gguf package.

Used by record_llama_cpp_logits.py next to llama.cpp. llama.cpp rounds the activations entering
every quantized matmul to 8 bits (one scale per 32 values); on SmolLM2-135M its logits end up to
~1.4 away from the exact values, so llama.cpp cannot pin our engine down tightly. This forward has
no such rounding: the only approximation is float64 arithmetic on the stored (dequantized)
weights, which is exactly what our float32 engine approximates, so it supports a tolerance
~10000x tighter.

Written from the architecture's definition, independently of runtime/model: pre-norm blocks,
RMSNorm, grouped-query attention with RoPE on adjacent pairs (GGUF "llama" layout: q/k rows are
already permuted so that pair i is dims 2i, 2i+1), SwiGLU MLP, final norm, LM head (output.weight,
or the token embedding when tied). Only what SmolLM2 uses is supported (no biases, no QK norm, no
RoPE scaling); anything else raises.
"""
import numpy as np


class Float64Llama:
    def __init__(self, model_path):
        from gguf import GGUFReader
        from gguf.quants import dequantize

        reader = GGUFReader(model_path)
        meta = {}
        for key, field in reader.fields.items():
            if key.startswith("llama.") and field.data:
                meta[key] = field.parts[field.data[0]][0]
        arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
        if arch != "llama":
            raise ValueError(f"only the llama architecture is supported, got {arch}")
        self.n_layers = int(meta["llama.block_count"])
        self.dim = int(meta["llama.embedding_length"])
        self.n_heads = int(meta["llama.attention.head_count"])
        self.n_kv = int(meta["llama.attention.head_count_kv"])
        self.head_dim = self.dim // self.n_heads
        self.eps = float(meta["llama.attention.layer_norm_rms_epsilon"])
        theta = float(meta.get("llama.rope.freq_base", 10000.0))
        if "llama.rope.scaling.type" in meta or int(meta.get("llama.rope.dimension_count",
                                                             self.head_dim)) != self.head_dim:
            raise ValueError("RoPE scaling / partial rotary is not supported here")
        self.inv_freq = theta ** (-np.arange(0, self.head_dim, 2, dtype=np.float64) / self.head_dim)

        self.w = {}
        for t in reader.tensors:
            shape = [int(x) for x in reversed(t.shape)]  # numpy order: [rows, cols]
            self.w[t.name] = dequantize(t.data, t.tensor_type).astype(np.float64).reshape(shape)
        if any(n.endswith((".bias", "attn_q_norm.weight", "attn_k_norm.weight")) for n in self.w):
            raise ValueError("biases / QK norm are not supported here")
        self.head = self.w.get("output.weight", self.w["token_embd.weight"])  # [vocab, dim]
        self.cache = []  # per layer: (k [t, kv, hd], v [t, kv, hd])

    def reset(self):
        self.cache = []

    def _rms(self, x, g):  # x: [n, dim]
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * g

    def _rope(self, x, pos):  # x: [n, heads, head_dim], pos: [n]
        a = pos[:, None] * self.inv_freq[None, :]
        c, s = np.cos(a)[:, None, :], np.sin(a)[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * c - x1 * s
        out[..., 1::2] = x0 * s + x1 * c
        return out

    def forward(self, tokens):
        """Appends tokens after the cached ones; returns their logits [n, vocab]."""
        n = len(tokens)
        start = self.cache[0][0].shape[0] if self.cache else 0
        pos = np.arange(start, start + n, dtype=np.float64)
        x = self.w["token_embd.weight"][np.asarray(tokens)]  # [n, dim]
        group = self.n_heads // self.n_kv
        # Query i (absolute position start + i) sees keys 0 .. start + i.
        mask = np.triu(np.full((n, start + n), -np.inf), start + 1)
        for layer in range(self.n_layers):
            p = f"blk.{layer}."
            h = self._rms(x, self.w[p + "attn_norm.weight"])
            q = self._rope((h @ self.w[p + "attn_q.weight"].T).reshape(n, self.n_heads, -1), pos)
            k = self._rope((h @ self.w[p + "attn_k.weight"].T).reshape(n, self.n_kv, -1), pos)
            v = (h @ self.w[p + "attn_v.weight"].T).reshape(n, self.n_kv, -1)
            if len(self.cache) <= layer:
                self.cache.append((k, v))
            else:
                k0, v0 = self.cache[layer]
                self.cache[layer] = (np.concatenate([k0, k]), np.concatenate([v0, v]))
            keys, vals = self.cache[layer]
            att = np.empty((n, self.n_heads, self.head_dim))
            for head in range(self.n_heads):
                kv = head // group
                s = q[:, head] @ keys[:, kv].T / np.sqrt(self.head_dim) + mask
                s = np.exp(s - s.max(1, keepdims=True))
                att[:, head] = (s / s.sum(1, keepdims=True)) @ vals[:, kv]
            x = x + att.reshape(n, self.dim) @ self.w[p + "attn_output.weight"].T
            h = self._rms(x, self.w[p + "ffn_norm.weight"])
            gate = h @ self.w[p + "ffn_gate.weight"].T
            up = h @ self.w[p + "ffn_up.weight"].T
            x = x + (gate / (1.0 + np.exp(-gate)) * up) @ self.w[p + "ffn_down.weight"].T
        return self._rms(x, self.w["output_norm.weight"]) @ self.head.T
