"""Does compiled addcmul's speed at 256 MiB depend on the size of its first call? One mode per process.

    python3 scripts/inductor_first_call.py small_first|large_first|small_first_noautotune

Each run compiles torch.addcmul (dynamic) with a private Inductor cache, makes its first call at
64 KiB or 256 MiB per tensor, then times 64 KiB, 256 MiB and 16 MiB by CUDA events and prints the
autotuned config Inductor kept. The H200 output: results/h200/logs/inductor-first-call-20261202T0401.log.
scenarios.kernels.compile_tuned exists because of it.
"""
import glob
import json
import os
import sys
import tempfile

MODES = ("small_first", "large_first", "small_first_noautotune")
if len(sys.argv) != 2 or sys.argv[1] not in MODES:
    print(f"usage: inductor_first_call.py {'|'.join(MODES)}", file=sys.stderr)
    sys.exit(2)
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="ind-")
import torch  # noqa: E402  (after the cache folder is set: Inductor reads it on import)
mode = sys.argv[1]
if mode.endswith("noautotune"):
    torch._inductor.config.triton.autotune_pointwise = False
f = torch.compile(torch.addcmul, fullgraph=True, dynamic=True)
def t(n):
    return [torch.randn(n, device="cuda") for _ in range(3)]
small, large = t(16 << 10), t(64 << 20)
first = large if mode.startswith("large") else small
f(*first)
torch.cuda.synchronize()
out = {}
for name, args in (("small", small), ("large", large), ("mid", t(4 << 20))):
    for _ in range(5):
        f(*args)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(30):
        s.record()
        f(*args)
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    ms = sorted(ts)[15]
    out[name] = f"{ms*1e3:.1f} us, {4*args[0].numel()*4/ms/1e6:.0f} GB/s"
cfgs = [open(p).read() for p in glob.glob(os.environ["TORCHINDUCTOR_CACHE_DIR"] + "/**/*.best_config", recursive=True)]
print(mode, json.dumps(out), "best_config:", cfgs)
