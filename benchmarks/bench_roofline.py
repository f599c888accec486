"""TensorViz's roofline estimate held against a measured run, per model and per layer.

    python benchmarks/bench_roofline.py [--device-profile NAME] [--dtype float32|bfloat16]
                                        [--size small|large] [--calibrate] [--json FILE]

Three models of our own (plain JAX, each layer under its own ``jax.named_scope``): an MLP,
a small pre-norm transformer (two blocks: attention and MLP) and a conv net (two 3×3
convolutions, pooling, a dense head). For each:

1. TensorViz captures it as a user would (``capture.session.run_capture``: the checks, a
   one-shot worker, which runs JAX on the CPU alone while this process holds the
   accelerator), and its roofline is read from the graph's FLOPs and bytes and the
   device profile (``capture/analysis/devices.toml``; ``cpu`` is this machine):
   ``max(FLOPs / peak, bytes / bandwidth)`` per op, summed, for the whole model and for
   each layer (``capture.analysis.layer_table.layer_rows``);
2. the same functions run on this process's default device (a TPU when there is one):
   ``jax.jit``, warmed up (compiled, three calls), then timed call by call with
   ``block_until_ready`` (the median of at least ``--runs`` calls and 0.3 s), the whole
   model and each layer on its own input;
3. it prints estimated beside measured, and their ratio (measured / estimated: above 1,
   the estimate is optimistic, as a roofline is by construction).

``--calibrate`` first measures this machine's peak: the best FLOP/s of jitted float32
matrix products (2048³ and 4096³) and the best bandwidth of a jitted ``x * 0.5 + 1`` over
128 MiB, its input donated (bytes read + written per second, best of ten), and prints them
as a ``devices.toml`` entry.

Prints figures and ratios side by side; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODELS = '''
import jax
import jax.numpy as jnp

DTYPE = jnp.float32  # replaced by the benchmark
SIZES = {}  # replaced by the benchmark (--size)


def _dense(key, n_in, n_out):
    return {"w": (jax.random.normal(key, (n_in, n_out)) / n_in ** 0.5).astype(DTYPE), "b": jnp.zeros((n_out,), DTYPE)}


def _norm(x):
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.mean(jnp.square(x - m), axis=-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5)


# ---------------------------------------------------------------- MLP
def mlp_layer(p, x):
    return jax.nn.gelu(x @ p["w"] + p["b"])


def mlp_head(p, x):
    return x @ p["w"] + p["b"]


MLP = [("fc1", mlp_layer), ("fc2", mlp_layer), ("fc3", mlp_layer), ("head", mlp_head)]


def mlp_inputs():
    k = jax.random.split(jax.random.key(0), 5)
    w, n = SIZES["mlp_width"], SIZES["mlp_batch"]
    dims = [w // 4, w, w, w, w // 4]
    params = {name: _dense(k[i], dims[i], dims[i + 1]) for i, (name, _) in enumerate(MLP)}
    return {"args": (params, jax.random.normal(k[4], (n, w // 4)).astype(DTYPE)), "kwargs": {}}


# ---------------------------------------------------------------- transformer
HEADS = 8


def attention(p, x):
    b, s, d = x.shape
    h = _norm(x)
    qkv = h @ p["qkv"]["w"] + p["qkv"]["b"]
    q, k, v = jnp.split(qkv.reshape(b, s, 3 * HEADS, d // HEADS), 3, axis=2)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / (d // HEADS) ** 0.5
    mask = jnp.tril(jnp.ones((s, s), bool))
    scores = jnp.where(mask, scores, jnp.finfo(scores.dtype).min)
    att = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, axis=-1), v).reshape(b, s, d)
    return x + att @ p["out"]["w"] + p["out"]["b"]


def feed_forward(p, x):
    h = jax.nn.gelu(_norm(x) @ p["up"]["w"] + p["up"]["b"])
    return x + h @ p["down"]["w"] + p["down"]["b"]


TRANSFORMER = [("block0.attention", attention), ("block0.mlp", feed_forward),
               ("block1.attention", attention), ("block1.mlp", feed_forward)]


def transformer_inputs():
    D, FF = SIZES["d_model"], 4 * SIZES["d_model"]
    k = iter(jax.random.split(jax.random.key(1), 20))
    params = {}
    for name, fn in TRANSFORMER:
        if fn is attention:
            params[name] = {"qkv": _dense(next(k), D, 3 * D), "out": _dense(next(k), D, D)}
        else:
            params[name] = {"up": _dense(next(k), D, FF), "down": _dense(next(k), FF, D)}
    shape = (SIZES["t_batch"], SIZES["t_seq"], D)
    return {"args": (params, jax.random.normal(next(k), shape).astype(DTYPE)), "kwargs": {}}


# ---------------------------------------------------------------- conv net
def conv(p, x):
    y = jax.lax.conv_general_dilated(x, p["w"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jax.nn.relu(y + p["b"])


def pool(p, x):
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def classify(p, x):
    return jnp.mean(x, axis=(1, 2)) @ p["w"] + p["b"]


CONVNET = [("conv1", conv), ("pool1", pool), ("conv2", conv), ("pool2", pool), ("conv3", conv), ("head", classify)]


def convnet_inputs():
    k = jax.random.split(jax.random.key(2), 5)
    chans = [(3, 64), None, (64, 128), None, (128, 256)]
    params = {}
    for i, (name, fn) in enumerate(CONVNET):
        if fn is conv:
            cin, cout = chans[i]
            params[name] = {"w": (jax.random.normal(k[i], (3, 3, cin, cout)) / (9 * cin) ** 0.5).astype(DTYPE),
                            "b": jnp.zeros((cout,), DTYPE)}
        elif fn is classify:
            params[name] = _dense(k[4], 256, 10)
        else:
            params[name] = {}
    shape = (SIZES["c_batch"], SIZES["c_size"], SIZES["c_size"], 3)
    return {"args": (params, jax.random.normal(k[3], shape).astype(DTYPE)), "kwargs": {}}


def _run(layers, params, x):
    for name, fn in layers:
        with jax.named_scope(name):
            x = fn(params[name], x)
    return x


def mlp(params, x):
    return _run(MLP, params, x)


def transformer(params, x):
    return _run(TRANSFORMER, params, x)


def convnet(params, x):
    return _run(CONVNET, params, x)
'''

NAMES = ("mlp", "transformer", "convnet")
#: Model sizes: ``large`` for an accelerator (milliseconds a call), ``small`` for a CPU.
SIZES = {
    "large": {"mlp_width": 8192, "mlp_batch": 2048, "d_model": 1024, "t_batch": 16, "t_seq": 1024,
              "c_batch": 64, "c_size": 128},
    "small": {"mlp_width": 2048, "mlp_batch": 128, "d_model": 256, "t_batch": 2, "t_seq": 256,
              "c_batch": 4, "c_size": 64},
}
LAYER_LISTS = {"mlp": "MLP", "transformer": "TRANSFORMER", "convnet": "CONVNET"}


def timed(fn: Any, *args: Any, runs: int = 20, min_s: float = 0.3) -> float:
    """The median seconds of one call of jitted ``fn`` (warmed up: compiled and run three
    times), over at least ``runs`` calls and ``min_s`` seconds, each to block_until_ready."""
    import jax

    for _ in range(3):
        jax.block_until_ready(fn(*args))
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < runs or time.perf_counter() - started < min_s:
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
        if len(times) > 2000:
            break
    return statistics.median(times)


def calibrate() -> dict[str, float]:
    """This machine's measured peak: float32 matrix products and a streaming kernel."""
    import jax
    import jax.numpy as jnp

    best_flops = 0.0
    for n in (2048, 4096):
        a = jnp.ones((n, n), jnp.float32)
        f = jax.jit(lambda x, y: x @ y)
        s = timed(f, a, a, runs=5, min_s=0.5)
        best_flops = max(best_flops, 2 * n ** 3 / s)
    # The result replaces its (donated) input, so no call pays for fresh pages.
    x = jnp.ones((32 * 1024 * 1024,), jnp.float32)  # 128 MiB
    g = jax.jit(lambda v: v * 0.5 + 1.0, donate_argnums=0)
    for _ in range(3):
        x = jax.block_until_ready(g(x))
    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        x = jax.block_until_ready(g(x))
        times.append(time.perf_counter() - t0)
    bandwidth = 2 * x.nbytes / min(times)
    return {"float32": best_flops, "bandwidth": bandwidth}


def profile_name(jax: Any) -> str:
    d = jax.devices()[0]
    kind = getattr(d, "device_kind", "").lower()
    if d.platform == "tpu":
        return "tpu-v5e" if "v5 lite" in kind or "v5e" in kind else "tpu-v5p" if "v5" in kind else "tpu-v4"
    return "cpu"


def capture_model(ws: Path, name: str, timeout: float) -> Any:
    from capture.recipe import parse_profile
    from capture.session.runner import run_capture

    table = {"kind": "model", "framework": "jax", "model": f"tv_roofline_models:{name}", "mode": "eval", "device": "cpu",
             "grad_enabled": False, "seed": 0, "init": {"args": [], "kwargs": {}},
             "inputs": {"factory": f"tv_roofline_models:{name}_inputs"}}
    started = time.perf_counter()
    c = run_capture(ws, parse_profile("bench", table), timeout=timeout)
    if c.failure is not None:
        raise SystemExit(f"capture of {name} failed: {c.failure.type}: {c.failure.message}")
    return c, time.perf_counter() - started


def estimates(capture: Any, device: Any) -> tuple[float, dict[str, float], dict[str, Any]]:
    """The roofline of the whole program and of each top-level group (each layer's named
    scope), as the viewer's cost panel and ``tensorviz summary`` compute them."""
    from capture.analysis.analysis import Analysis

    costs = Analysis(capture).costs()
    times = costs.times(device)  # slot 0: the whole program; slot g + 1: group g
    layers = {g.name: times[g.id + 1] for g in capture.groups if g.parent is None}
    return times[0], layers, costs.totals()


def measure(module: Any, name: str, runs: int) -> tuple[float, dict[str, float]]:
    import jax

    params, x = jax.device_put(getattr(module, f"{name}_inputs")()["args"])
    whole = timed(jax.jit(getattr(module, name)), params, x, runs=runs)
    per_layer = {}
    for layer, fn in getattr(module, LAYER_LISTS[name]):
        f = jax.jit(fn)
        per_layer[layer] = timed(f, params[layer], x, runs=runs)
        x = jax.block_until_ready(f(params[layer], x))
    return whole, per_layer


def ms(s: float) -> str:
    return f"{s * 1e3:9.3f} ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device-profile", help="the device profile to estimate with (default: this device's)")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), help="default: bfloat16 on a TPU, float32 elsewhere")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--size", choices=tuple(SIZES), help="default: large on an accelerator, small on a CPU")
    ap.add_argument("--calibrate", action="store_true", help="measure this machine's peak FLOP/s and bandwidth first")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per capture")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()

    import jax

    from capture.analysis import devices as device_table

    platform = jax.devices()[0].platform  # this process opens its device first (the TPU, where there is one)
    dtype = args.dtype or ("bfloat16" if platform == "tpu" else "float32")
    out: dict[str, Any] = {"jax": jax.__version__, "device": str(jax.devices()[0]),
                           "device_kind": getattr(jax.devices()[0], "device_kind", ""), "dtype": dtype, "models": {}}
    if args.calibrate:
        cal = calibrate()
        out["calibration"] = cal
        print(f"calibration: float32 matmul {cal['float32'] / 1e9:.1f} GFLOP/s (best of 2048³, 4096³); "
              f"bandwidth {cal['bandwidth'] / 1e9:.1f} GB/s (x*0.5+1 over 128 MiB, read + written)")
        print(f"  [devices.cpu]\n  bandwidth = {cal['bandwidth']:.3g}\n  peak_flops = {{ float32 = {cal['float32']:.3g} }}")
    table = device_table.load()
    name = args.device_profile or profile_name(jax)
    device = table[name]
    out["profile"] = device.json()
    print(f"device: {out['device']} ({out['device_kind']}); profile {name}: {device.label}; dtype {dtype}; "
          f"JAX {jax.__version__}")
    if device.note:
        print(f"  {name}: {device.note}")

    with tempfile.TemporaryDirectory(prefix="tv-roofline-") as tmp:
        ws = Path(tmp)
        size = args.size or ("small" if platform == "cpu" else "large")
        out["size"] = {"name": size, **SIZES[size]}
        text = textwrap.dedent(MODELS).replace("DTYPE = jnp.float32", f"DTYPE = jnp.{dtype}")
        (ws / "tv_roofline_models.py").write_text(text.replace("SIZES = {}", f"SIZES = {SIZES[size]!r}"))
        sys.path.insert(0, str(ws))
        import tv_roofline_models as models  # noqa: E402  (the workspace just written)

        ratios = []
        for model in NAMES:
            capture, took = capture_model(ws, model, args.timeout)
            est, est_layers, totals = estimates(capture, device)
            meas, meas_layers = measure(models, model, args.runs)
            ratio = meas / est if est > 0 else float("nan")
            ratios.append(ratio)
            print(f"\n{model}: {totals['flops'] / 1e9:.2f} GFLOPs, "
                  f"{(totals['bytes_read'] + totals['bytes_written']) / 2 ** 20:.1f} MiB moved (unfused); "
                  f"captured in {took:.1f} s")
            print(f"  {'':18} {'estimated':>12} {'measured':>12} {'measured/est.':>14}")
            print(f"  {'whole model':18} {ms(est)} {ms(meas)} {ratio:13.2f}×")
            layers = {}
            for layer, m in meas_layers.items():
                e = est_layers.get(layer)
                r = m / e if e else float("nan")
                layers[layer] = {"estimated_s": e, "measured_s": m, "ratio": r}
                print(f"  {layer:18} {ms(e) if e is not None else '        n/a':>12} {ms(m)} {r:13.2f}×")
            out["models"][model] = {"estimated_s": est, "measured_s": meas, "ratio": ratio, "flops": totals["flops"],
                                    "bytes": totals["bytes_read"] + totals["bytes_written"], "capture_s": took,
                                    "layers": layers}
        print(f"\nwhole models: measured runs took {min(ratios):.2f}–{max(ratios):.2f}× the estimate on {device.label}")
        out["ratio_range"] = [min(ratios), max(ratios)]
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
