#!/usr/bin/env python3
"""Baselines of `irisgen bench` that need torch: NCCL through torch.distributed
(torch_nccl; irisgen measures NCCL through its own C API itself) and PyTorch
symmetric memory, and for MoE torch's all_to_all path and DeepEP's intranode
kernels (where `import deep_ep` works), timed like irisgen's own collectives
(CUDA events after a warm-up, eager back-to-back calls and graph replay,
slowest rank) and written in the same CSV schema. `irisgen bench` starts it;
it can also run alone:

    python3 baselines.py --world 2 --sizes 8192,1048576 --dtypes bf16 --out base.csv
"""
import argparse
import csv
import datetime
import os
import sys

# No NVLink multicast on shared machines (see docs/gpu-machines.md); set before torch loads.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

FIELDS = ["impl", "collective", "variant", "dtype", "world", "bytes", "mode",
          "time_us", "algbw_gbps", "busbw_gbps", "device", "date", "note",
          "time_min_us", "time_max_us", "repeats"]
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def iterations(nbytes):
    """Calls per timed batch: many for small messages, few for large ones."""
    if nbytes <= 1 << 20:
        return 100
    if nbytes <= 16 << 20:
        return 30
    return 8


def timed(fn, mode, nbytes, warmup, repeats):
    """Microseconds per call of fn on this rank in each of `repeats` timed
    batches: k eager back-to-back calls, or one replay of a graph of k
    calls; every batch starts after a barrier (as irisgen's do)."""
    k = iterations(nbytes)
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    run = None
    if mode == "eager":
        def run():
            for _ in range(k):
                fn()
    else:
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn()  # warm up on the side stream, as graph capture wants
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            for _ in range(k):
                fn()
        run = g.replay
    run()
    torch.cuda.synchronize()
    out = []
    for _ in range(repeats):
        dist.barrier()
        torch.cuda.synchronize()
        start.record()
        run()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1000.0 / k)
    return out


def slowest(us):
    """Per batch, the largest time over the ranks."""
    t = torch.tensor(us, device="cuda", dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def summary(us):
    """(median, min, max) of the batches, as bench.Summarize."""
    s = sorted(us)
    n = len(s)
    m = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    return m, s[0], s[-1]


def cases(world, rank, dtype, nbytes, group_name):
    """(impl, collective, variant, fn) for every baseline at this size; the
    size is nccl-tests' (all_gather: output, reduce_scatter: input)."""
    es = torch.tensor([], dtype=dtype).element_size()
    n = nbytes // es
    dev = torch.device("cuda", rank)
    out = []
    x = torch.randn(n, dtype=dtype, device=dev)
    out.append(("torch_nccl", "all_reduce", "dist", lambda: dist.all_reduce(x)))
    per = n // world
    if per > 0:
        shard = torch.randn(per, dtype=dtype, device=dev)
        full = torch.empty(per * world, dtype=dtype, device=dev)
        out.append(("torch_nccl", "all_gather", "dist", lambda: dist.all_gather_into_tensor(full, shard)))
        src = torch.randn(per * world, dtype=dtype, device=dev)
        dst = torch.empty(per, dtype=dtype, device=dev)
        out.append(("torch_nccl", "reduce_scatter", "dist", lambda: dist.reduce_scatter_tensor(dst, src)))
        a2a_in = torch.randn(per * world, dtype=dtype, device=dev)
        a2a_out = torch.empty_like(a2a_in)
        out.append(("torch_nccl", "all_to_all", "dist", lambda: dist.all_to_all_single(a2a_out, a2a_in)))
    if group_name is not None:
        import torch.distributed._symmetric_memory as symm_mem
        try:
            buf = symm_mem.empty(n, dtype=dtype, device=dev)
            symm_mem.rendezvous(buf, group_name)
            buf.copy_(x)
            res = torch.empty_like(buf)
            out.append(("torch_symm_mem", "all_reduce", "one_shot",
                        lambda: torch.ops.symm_mem.one_shot_all_reduce_out(buf, "sum", group_name, res)))
            out.append(("torch_symm_mem", "all_reduce", "two_shot",
                        lambda: torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", group_name)))
        except Exception as e:  # noqa: BLE001 (reported, not hidden)
            print(f"rank {rank}: torch symmetric memory unavailable at {nbytes} bytes: {e}", file=sys.stderr)
    return out


def moe_cases(world, rank, tokens, hidden, ks):
    """Torch's MoE path (nvFuser's NCCL path): counts exchanged with
    all_to_all_single, then the rows with all_to_all_single and those splits
    (a host sync for the splits); combine sends the rows back and sums them
    weighted. Yields (collective, variant, nbytes, fn) for dispatch and
    combine separately."""
    dev = torch.device("cuda", rank)
    experts = 8 * world
    per_rank = experts // world
    for k in ks:
        for t in tokens:
            x = torch.zeros(t, hidden, dtype=torch.bfloat16, device=dev)
            ids = torch.randint(0, experts, (t, k), device=dev)
            w = torch.ones(t, k, dtype=torch.float32, device=dev)
            state = {}

            def dispatch():
                dst = (ids // per_rank).flatten()
                order = torch.argsort(dst)
                send = torch.bincount(dst, minlength=world)
                recv = torch.empty_like(send)
                dist.all_to_all_single(recv, send)
                s_list, r_list = send.tolist(), recv.tolist()
                rows = x[order // k]
                out = torch.empty(sum(r_list), hidden, dtype=x.dtype, device=dev)
                dist.all_to_all_single(out, rows, r_list, s_list)
                state.update(order=order, s=s_list, r=r_list, rows=out)

            def combine():
                back = torch.empty(sum(state["s"]), hidden, dtype=x.dtype, device=dev)
                dist.all_to_all_single(back, state["rows"], state["s"], state["r"])
                y = torch.zeros(t, hidden, dtype=torch.float32, device=dev)
                wf = w.flatten()[state["order"]].unsqueeze(1)
                y.index_add_(0, state["order"] // k, back.float() * wf)
                return y.to(x.dtype)

            dispatch()
            yield f"moe_dispatch_k{k}", "a2a", t * hidden * 2, dispatch
            yield f"moe_combine_k{k}", "a2a", t * hidden * 2, combine


# DeepEP's tuning space (its tests/test_intranode.py tunes the chunk sizes at
# 24 SMs; more SMs are tried too, since a collective timed alone may use
# them, up to 128 of an H100's 132: at 4096 tokens 64, the most tried
# before, won every cell): SMs (two a channel), tokens a send chunk, tokens
# a receive buffer.
DEEPEP_SMS = (20, 24, 32, 48, 64, 96, 128)
DEEPEP_DISPATCH_CHUNKS = (4, 8, 12, 16, 24, 32)
DEEPEP_COMBINE_CHUNKS = (1, 2, 4, 8, 12, 16)
DEEPEP_RECV_TOKENS = 256


def deepep_version():
    """The installed DeepEP's version, as its package metadata says."""
    from importlib import metadata
    for name in ("deep_ep", "deep-ep"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return "unknown version"


def fastest(candidates, make, iters=10, finalists=3, rounds=3):
    """Index of the candidate whose fn (make(candidate)) is fastest on the
    slowest rank. Every rank times every candidate and takes the same
    index, since the ranks of a DeepEP call must use one configuration.
    A first pass times each candidate once; the `finalists` fastest are
    then timed again `rounds` times each, in turn, and each keeps its
    fastest batch, so that one noisy batch of a short pass cannot pick a
    slower configuration than the cell is later timed at."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def batch(fn):
        dist.barrier()
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / iters

    fns = []
    times = torch.zeros(len(candidates), dtype=torch.float64, device="cuda")
    for i, c in enumerate(candidates):
        fns.append(make(c))
        fns[i]()
        torch.cuda.synchronize()
        times[i] = batch(fns[i])
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    # The same times on every rank, so the same finalists, in the same order.
    top = sorted(range(len(candidates)), key=lambda i: (times[i].item(), i))[:finalists]
    best = torch.full((len(top),), float("inf"), dtype=torch.float64, device="cuda")
    for _ in range(rounds):
        for j, i in enumerate(top):
            best[j] = min(best[j].item(), batch(fns[i]))
    dist.all_reduce(best, op=dist.ReduceOp.MAX)
    return top[int(torch.argmin(best).item())]


def deepep_cases(world, rank, tokens, hidden, ks):
    """DeepEP's intranode normal kernels through its own Buffer API, at the
    fastest configuration of DEEPEP_* for each cell (the ranks agree on
    it). 8 experts a rank as in irisgen's benchmark, k distinct experts a
    token drawn at random (irisgen's benchmark draws with replacement, so
    its tokens reach at most as many ranks: a small handicap to DeepEP
    at k=8). Yields (collective, variant, nbytes,
    fn, note, why not capturable or None) for:

    - dispatch "normal": the layout kernel and the dispatch of the rows with
      their top-k ids and weights, received into t*world rows
      (num_worst_tokens: no host sync, so it can be captured);
    - dispatch "cached": DeepEP's own tuning figure, the rows alone reusing
      an earlier call's layout (its handle), no top-k;
    - combine "normal": the received rows summed back onto their tokens,
      with their top-k weights (DeepEP adds the rows unweighted; irisgen
      weights them)."""
    import deep_ep
    recv = DEEPEP_RECV_TOKENS
    nvl_bytes = max(deep_ep.Config(s, max(DEEPEP_DISPATCH_CHUNKS), recv).get_nvl_buffer_size_hint(hidden * 2, world)
                    for s in DEEPEP_SMS)
    # Destroyed explicitly: DeepEP warns that its destructor can hang.
    buf = deep_ep.Buffer(dist.group.WORLD, nvl_bytes, 0, explicitly_destroy=True)
    try:
        yield from deepep_cells(deep_ep, buf, world, rank, tokens, hidden, ks)
    finally:
        torch.cuda.synchronize()
        buf.destroy()


def deepep_cells(deep_ep, buf, world, rank, tokens, hidden, ks):
    """deepep_cases' cells on buf."""
    dev = torch.device("cuda", rank)
    experts = 8 * world
    version = deepep_version()
    recv = DEEPEP_RECV_TOKENS
    for k in ks:
        for t in tokens:
            torch.manual_seed(rank)
            x = torch.randn(t, hidden, dtype=torch.bfloat16, device=dev)
            topk_idx = torch.topk(torch.rand(t, experts, device=dev), k, dim=-1, sorted=False)[1]
            topk_w = torch.rand(t, k, dtype=torch.float32, device=dev)
            worst = t * world

            def dispatch_with(cfg):
                def fn():
                    per_rank, _, per_expert, in_rank, _ = buf.get_dispatch_layout(topk_idx, experts)
                    return buf.dispatch(x, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank,
                                        num_tokens_per_expert=per_expert, topk_idx=topk_idx, topk_weights=topk_w,
                                        num_worst_tokens=worst, config=cfg)
                return fn

            # One dispatch a SM count: a handle holds its channel count, which
            # the cached dispatch and the combine must use too.
            received = {}
            for s in DEEPEP_SMS:
                recv_x, _, recv_w, _, handle, _ = dispatch_with(deep_ep.Config(s, 8, recv))()
                received[s] = (recv_x, recv_w, handle)
            torch.cuda.synchronize()

            def cfg_note(what, s, chunk):
                return f"DeepEP {version}, intranode, {s} SMs, {what} chunk {chunk} of {recv} tokens"

            cands = [(s, c) for s in DEEPEP_SMS for c in DEEPEP_DISPATCH_CHUNKS]
            s, c = cands[fastest(cands, lambda sc: dispatch_with(deep_ep.Config(sc[0], sc[1], recv)))]
            yield (f"moe_dispatch_k{k}", "normal", t * hidden * 2, dispatch_with(deep_ep.Config(s, c, recv)),
                   cfg_note("dispatch", s, c) + "; layout + rows with top-k, num_worst_tokens", None)

            def cached_with(sc):
                cfg, (_, _, handle) = deep_ep.Config(sc[0], sc[1], recv), received[sc[0]]
                return lambda: buf.dispatch(x, handle=handle, config=cfg)
            s, c = cands[fastest(cands, cached_with)]
            yield (f"moe_dispatch_k{k}", "cached", t * hidden * 2, cached_with((s, c)),
                   cfg_note("dispatch", s, c) + "; rows alone, an earlier call's layout (no top-k)", None)

            def combine_with(sc):
                cfg, (recv_x, recv_w, handle) = deep_ep.Config(sc[0], sc[1], recv), received[sc[0]]
                return lambda: buf.combine(recv_x, handle, topk_weights=recv_w, config=cfg)
            cands = [(s, c) for s in DEEPEP_SMS for c in DEEPEP_COMBINE_CHUNKS]
            s, c = cands[fastest(cands, combine_with)]
            yield (f"moe_combine_k{k}", "normal", t * hidden * 2, combine_with((s, c)),
                   cfg_note("combine", s, c) + "; rows summed unweighted, top-k weights alongside", None)


def rmsnorm_cases(rank, tokens, hidden, eps=1e-6):
    """The unfused path all_reduce_rmsnorm replaces, in torch: NCCL's
    all_reduce of the rows, the residual add, torch's rms_norm (a composite
    of pow, mean, rsqrt and mul where torch lacks F.rms_norm). Yields
    (variant, nbytes, fn); bf16, zeros, so every call stays finite."""
    import torch.nn.functional as F
    dev = torch.device("cuda", rank)
    rms_norm = getattr(F, "rms_norm", None)
    for t in tokens:
        x = torch.zeros(t, hidden, dtype=torch.bfloat16, device=dev)
        residual = torch.zeros_like(x)
        weight = torch.randn(hidden, dtype=torch.bfloat16, device=dev)

        def fn(x=x, residual=residual, weight=weight):
            dist.all_reduce(x)
            residual.add_(x)
            if rms_norm is not None:
                return rms_norm(residual, (hidden,), weight, eps)
            r = residual.float()
            return (r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight

        yield "unfused", t * hidden * 2, fn


def worker(rank, args):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=args.world, device_id=torch.device("cuda", rank))
    group_name = None
    if not args.no_symm_mem:
        try:
            group_name = dist.group.WORLD.group_name
        except Exception as e:  # noqa: BLE001
            print(f"rank {rank}: no symmetric memory group: {e}", file=sys.stderr)
    device = torch.cuda.get_device_name(rank)
    date = datetime.date.today().isoformat()
    rows = []

    def record(impl, coll, variant, dname, nbytes, mode, fn, note="", uncapturable=None):
        us = [-1.0] * args.repeats
        if mode == "graph" and uncapturable:
            note = f"not capturable: {uncapturable}"
        else:
            try:
                us = timed(fn, mode, nbytes, args.warmup, args.repeats)
            except Exception as e:  # noqa: BLE001
                note = f"{note}; failed: {type(e).__name__}: {e}".strip("; ").replace("\n", " ")[:300]
                torch.cuda.synchronize()
        us = slowest(us)  # every rank takes part, failed or not
        med, lo, hi = summary(us) if min(us) >= 0 else (float("nan"),) * 3
        rows.append({"impl": impl, "collective": coll, "variant": variant, "dtype": dname,
                     "world": args.world, "bytes": nbytes, "mode": mode,
                     # irisgen computes the bandwidths (bench.Row.SetBandwidth)
                     "time_us": f"{med:.3f}", "algbw_gbps": "nan", "busbw_gbps": "nan",
                     "device": device, "date": date, "note": note,
                     "time_min_us": f"{lo:.3f}", "time_max_us": f"{hi:.3f}", "repeats": args.repeats})
        if rank == 0:
            print(f"{impl:15s} {coll:14s} {variant:9s} {dname:4s} {nbytes:>10d} {mode:5s} {med:10.2f} us", flush=True)

    for dname in args.dtypes.split(","):
        dtype = DTYPES[dname]
        for nbytes in [int(s) for s in args.sizes.split(",")]:
            for impl, coll, variant, fn in cases(args.world, rank, dtype, nbytes, group_name):
                if args.collectives and coll not in args.collectives.split(","):
                    continue
                for mode in args.modes.split(","):
                    record(impl, coll, variant, dname, nbytes, mode, fn)
    if not args.collectives or "moe" in args.collectives.split(","):
        tokens, ks = [int(t) for t in args.moe_tokens.split(",")], [int(k) for k in args.moe_k.split(",")]
        impls = args.moe_impls.split(",")
        if "torch" in impls:
            for coll, variant, nbytes, fn in moe_cases(args.world, rank, tokens, args.moe_hidden, ks):
                for mode in args.modes.split(","):
                    record("torch", coll, variant, "bf16", nbytes, mode, fn,
                           uncapturable="the splits need a host sync")
        if "deepep" in impls:
            try:
                import deep_ep  # noqa: F401
            except ImportError as e:
                if rank == 0:
                    print(f"DeepEP not importable, its MoE rows are left out: {e}", file=sys.stderr)
            else:
                for coll, variant, nbytes, fn, note, uncapturable in deepep_cases(args.world, rank, tokens, args.moe_hidden, ks):
                    for mode in args.modes.split(","):
                        record("deepep", coll, variant, "bf16", nbytes, mode, fn, note, uncapturable)
    if not args.collectives or "all_reduce_rmsnorm" in args.collectives.split(","):
        for variant, nbytes, fn in rmsnorm_cases(rank, [int(t) for t in args.rmsnorm_tokens.split(",")], args.rmsnorm_hidden):
            for mode in args.modes.split(","):
                record("torch_nccl", "all_reduce_rmsnorm", variant, "bf16", nbytes, mode, fn)
    if rank == 0:
        with open(args.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS)
            w.writeheader()
            w.writerows(rows)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", type=int, default=torch.cuda.device_count())
    ap.add_argument("--sizes", required=True, help="comma-separated message sizes in bytes (nccl-tests sizes)")
    ap.add_argument("--dtypes", default="bf16")
    ap.add_argument("--modes", default="eager,graph")
    ap.add_argument("--collectives", default="", help="comma-separated subset (default: all)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=7, help="timed batches per cell (median, min and max kept)")
    ap.add_argument("--port", type=int, default=29517)
    ap.add_argument("--no-symm-mem", action="store_true")
    ap.add_argument("--moe-tokens", default="128,512,4096")
    ap.add_argument("--moe-hidden", type=int, default=7168)
    ap.add_argument("--moe-k", default="1,8")
    ap.add_argument("--moe-impls", default="torch,deepep",
                    help="MoE baselines: torch (all_to_all_single), deepep (its intranode kernels, where deep_ep imports)")
    ap.add_argument("--rmsnorm-tokens", default="1,2,4,8,16,32,64,128,256,512,1024,2048")
    ap.add_argument("--rmsnorm-hidden", type=int, default=7168)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.world < 2:
        sys.exit(f"baselines need at least 2 GPUs, found {args.world}")
    mp.spawn(worker, args=(args,), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
