"""Matrix products (cuda/nn/matmul.cu) in FP32 and TF32, the bias gradient and activation backward.

Row-major throughout: a linear layer is Y[M,N] = act(X[M,K] . W[K,N] + b[N]); its backward is
dX = dY . W^T (`matmul_nt`), dW = X^T . dY (`matmul_tn`, split over rows) and db = column sums of
dY (`column_sum_partial`, same split scheme), their split partials added in split order by the
backward's GradPartials (`plan_row_split`).
FP32 layers take dW and db in one pass (`matmul_tn_ones`, `plan_dw_db`) whose split partials wait
in a workspace shared by the backward's layers (`GradPartials`), all added by one launch
(`reduce_grad_splits`) after the backward.
The references compute products in float64 and round once to float32; TF32 references first
round the operands the way the tensor cores do (cvt.rna.tf32: nearest, ties away, 10-bit mantissa).
"""
from __future__ import annotations

import numpy as np

from ..driver import KernelSpec, i32, i64, ptr, reference
from ..driver.kernel_spec import pointer_of
from . import functional as F
from .layout import (ACT_IDENTITY, ACT_RELU, ACT_SIGMOID, ACT_TANH, GRAD_SPLIT_FIELDS, GRAD_SPLITS_MAX,
                     LINEAR_GROUP_FIELDS, TN_GROUP_FIELDS)

MODULE = "nn/matmul"
TILE = 64
GEMM_THREADS = 256
SMALL_TILE, SMALL_THREADS = 32, 256  # the *_t32 FP32 kernels (2x2 outputs per thread)
# Tiles (rows, columns) for layers at most 16 outputs wide (block 256): linear_fwd_f32_t16, 16 x 16 of one
# output a thread, and, from TALL_ROWS rows, linear_fwd_f32_t16_tall, 64 x 16 of four neighbouring outputs
# of a row a thread. One output a thread reads two shared floats an FMA: at B = 4,096 the narrow heads'
# group forward was bound by shared-memory loads (24.2 us a step on an H200; 19.2 with the tall tiles),
# while at B = 256 the tall tiles' 4x fewer blocks took it from 5.6 to 11.2 us.
SKINNY_TILE, TALL_SKINNY_TILE, TALL_ROWS = (16, 16), (64, 16), 4096
ELEMENTWISE_BLOCK = 256
REDUCE_BLOCK = 64  # reduce_grad_splits: an element's splits are one thread's serial sum; small blocks spread the
# long sums (the encoder's 256 splits at B = 4,096) over every SM
MAX_BLOCKS = 4096
SPLIT_TARGET_BLOCKS = 264  # two waves of an H200's 132 SMs
FILL_BLOCKS = 256  # fewer 64x64 tiles than this: FP32 GEMMs use 32x32 tiles (B = 4,096: 64x64 tiles of the
# 4,096 x 256 trunk, 256 blocks, took the forward GEMMs from 0.267 to 0.146 ms a step on an H200)
SPLIT_TARGET_WARPS = 132 * 32  # split reductions (fused path): about 32 resident warps per SM

ACTIVATIONS = {"identity": ACT_IDENTITY, "relu": ACT_RELU, "tanh": ACT_TANH, "sigmoid": ACT_SIGMOID}


def _linear_spec(name):
    return KernelSpec(name, MODULE, (ptr("Y"), ptr("X"), ptr("W"), ptr("bias"), i32("M"), i32("K"), i32("N"),
                                     i32("act")), doc="Y[M,N] = act(X[M,K] . W[K,N] + bias[N])")


def _nt_spec(name):
    return KernelSpec(name, MODULE, (ptr("C"), ptr("A"), ptr("B"), i32("M"), i32("K"), i32("N"), i32("accumulate")),
                      doc="C[M,N] (+)= A[M,K] . B[N,K]^T")


def _tn_spec(name):
    return KernelSpec(name, MODULE, (ptr("C"), ptr("A"), ptr("B"), i32("R"), i32("M"), i32("N"), i32("r_chunk")),
                      doc="C[z][M,N] = sum over rows r of split z of A[r,m] B[r,n]; grid.z = splits")


LINEAR_FWD = {"f32": _linear_spec("linear_fwd_f32"), "tf32": _linear_spec("linear_fwd_tf32")}
MATMUL_NT = {"f32": _nt_spec("matmul_nt_f32"), "tf32": _nt_spec("matmul_nt_tf32")}
MATMUL_TN = {"f32": _tn_spec("matmul_tn_f32"), "tf32": _tn_spec("matmul_tn_tf32")}
# FP32 kernels with 32x32 tiles (block 256), same results as the 64x64 ones: for small outputs.
LINEAR_FWD_T32 = _linear_spec("linear_fwd_f32_t32")
# 16x16 and 64x16 tiles (SKINNY_TILE, TALL_SKINNY_TILE), same results again: layers at most 16 outputs wide.
LINEAR_FWD_T16 = _linear_spec("linear_fwd_f32_t16")
LINEAR_FWD_T16_TALL = _linear_spec("linear_fwd_f32_t16_tall")
SKINNY_KERNELS = {SKINNY_TILE: LINEAR_FWD_T16, TALL_SKINNY_TILE: LINEAR_FWD_T16_TALL}
MATMUL_NT_T32 = _nt_spec("matmul_nt_f32_t32")
MATMUL_TN_T32 = _tn_spec("matmul_tn_f32_t32")
# TF32 on mma.sync with 32x32 tiles (block 128, k staged by cp.async): the forward and dX of layers
# too small to fill the GPU with 64x64 tiles.
TF32_T32 = {"linear": _linear_spec("linear_fwd_tf32_t32"), "nt": _nt_spec("matmul_nt_tf32_t32")}
TF32_T32_THREADS = 128
# The forwards of several independent layers in one launch: each linear kernel's group form reads the layers
# (LINEAR_GROUP_FIELDS int64 a row: addresses, shape, activation) from a table; grid.z = the layers.
LINEAR_GROUP = {spec.name: KernelSpec(spec.name + "_group", MODULE, (ptr("layers"),),
                                      doc=f"{spec.name} of every layer in the table, block z a tile of layer z")
                for spec in (*LINEAR_FWD.values(), LINEAR_FWD_T32, LINEAR_FWD_T16, LINEAR_FWD_T16_TALL,
                             TF32_T32["linear"])}
# dW and db in one pass: A gets a column of ones, so C[z] is (M+1) x N with the column sums last.
MATMUL_TN_ONES = {TILE: KernelSpec("matmul_tn_ones_f32", MODULE, MATMUL_TN["f32"].params,
                                   doc="C[z][M+1,N]: X^T dY over split z's rows, then dY's column sums"),
                  SMALL_TILE: KernelSpec("matmul_tn_ones_f32_t32", MODULE, MATMUL_TN["f32"].params,
                                         doc="matmul_tn_ones_f32 with 32x32 tiles")}
# The dW + db passes of several layers in one launch (32x32 tiles), each pass with its own split.
MATMUL_TN_ONES_GROUP = KernelSpec("matmul_tn_ones_f32_t32_group", MODULE, (ptr("passes"), i32("n_passes")),
                                  doc="matmul_tn_ones_f32 of every pass in the table (TN_GROUP_FIELDS rows), block z "
                                      "a tile of one split of one pass")
REDUCE_GRAD_SPLITS = KernelSpec("reduce_grad_splits", MODULE, (
    ptr("grad"), ptr("partials"), ptr("table"), i32("n_entries"), i64("total")),
    doc="every split dW + db pass of a backward summed in split order into grad (table: GRAD_SPLIT_FIELDS rows)")
COLUMN_SUM_PARTIAL = KernelSpec("column_sum_partial", MODULE,
                                (ptr("partials"), ptr("X"), i32("R"), i32("N"), i32("r_chunk")),
                                doc="partials[z][n] = sum of X[r][n] over the rows of split z")
ACT_BWD = KernelSpec("act_bwd", MODULE, (ptr("dx"), ptr("dy"), ptr("y"), i64("n"), i32("act")),
                     doc="dx = dy * act'(y), through the activation's output")
PRECISIONS = ("f32", "tf32")


def tile_dims(tile) -> tuple[int, int]:
    """(rows, columns) of a tiling: a square tile's side, or a (rows, columns) pair (the skinny tiles)."""
    return (tile, tile) if isinstance(tile, int) else tile


def gemm_grid(M: int, N: int, splits: int = 1, tile=TILE) -> tuple[int, int, int]:
    rows, cols = tile_dims(tile)
    return (-(-N // cols), -(-M // rows), splits)


def f32_tile(M: int, N: int, kind: str = "linear"):
    """The FP32 tiling for an M x N output: 64 when that gives enough blocks to fill the GPU, else 32;
    SKINNY_TILE (TALL_SKINNY_TILE from TALL_ROWS rows) for a layer's forward at most 16 outputs wide (a
    wider tile would idle most of its threads)."""
    if kind == "linear" and N <= SKINNY_TILE[1]:
        return TALL_SKINNY_TILE if M >= TALL_ROWS else SKINNY_TILE
    grid = gemm_grid(M, N)
    return TILE if grid[0] * grid[1] >= FILL_BLOCKS else SMALL_TILE


def layer_precision(M: int, N: int, precision: str) -> str:
    """The precision a layer with an M x N output runs at: "tf32" keeps the tensor cores only where
    the 64x64 mma grid fills the GPU; smaller layers run the FP32 32x32 kernels and the fused
    dW+db pass, which are faster there (a few hundred blocks of a 33-MFLOP GEMM are bound by
    staging and latency, not by FMA throughput) and exact FP32."""
    if precision == "tf32":
        grid = gemm_grid(M, N)
        return "tf32" if grid[0] * grid[1] >= FILL_BLOCKS else "f32"
    return precision


def gemm_kernel(kind: str, M: int, N: int, precision: str):
    """(spec, tile, threads) of the linear/nt/tn kernel for an M x N output. A TF32 forward or dX below
    the 64x64 grid that fills the GPU takes the 32x32 mma kernels (a forward at most 16 wide: FP32's
    skinny tiles); `Linear` asks for a TF32 dW only where that grid fills the GPU."""
    if precision == "tf32" and kind in TF32_T32 and layer_precision(M, N, precision) == "f32":
        if not (kind == "linear" and N <= SKINNY_TILE[1]):
            return TF32_T32[kind], SMALL_TILE, TF32_T32_THREADS
        precision = "f32"
    tile = f32_tile(M, N, kind) if precision == "f32" else TILE
    if tile in SKINNY_KERNELS:
        return SKINNY_KERNELS[tile], tile, SMALL_THREADS
    if tile == SMALL_TILE:
        return {"linear": LINEAR_FWD_T32, "nt": MATMUL_NT_T32, "tn": MATMUL_TN_T32}[kind], tile, SMALL_THREADS
    return {"linear": LINEAR_FWD, "nt": MATMUL_NT, "tn": MATMUL_TN}[kind][precision], tile, GEMM_THREADS


def elementwise_grid(n: int) -> int:
    return max(1, min(-(-int(n) // ELEMENTWISE_BLOCK), MAX_BLOCKS))


def row_split(R: int, tiles: int, target: int = SPLIT_TARGET_BLOCKS) -> tuple[int, int]:
    """(splits, r_chunk) for a reduction over R rows when the output has `tiles` blocks' worth of work:
    enough splits to fill about two waves (`target` blocks; the fused path counts warps), chunks a multiple
    of 16 rows and at least 64 long."""
    want = max(1, min(-(-target // max(tiles, 1)), -(-R // 64)))
    chunk = -(-R // want)
    chunk = -(-chunk // 16) * 16
    return -(-R // chunk), chunk


def _operand(x: np.ndarray, precision: str) -> np.ndarray:
    return F.round_tf32(x) if precision == "tf32" else x


def _register_linear(precision):
    @reference(LINEAR_FWD[precision])
    def _linear(launch, Y, X, W, bias, M, K, N, act):
        M, K, N = int(M), int(K), int(N)
        x = _operand(X.f32(M * K).reshape(M, K), precision)
        w = _operand(W.f32(K * N).reshape(K, N), precision)
        z = F.matmul32(x, w) + bias.f32(N)
        Y.f32(M * N).reshape(M, N)[...] = F.activate(z, int(act))

    @reference(MATMUL_NT[precision])
    def _nt(launch, C, A, B, M, K, N, accumulate):
        M, K, N = int(M), int(K), int(N)
        a = _operand(A.f32(M * K).reshape(M, K), precision)
        b = _operand(B.f32(N * K).reshape(N, K), precision)
        prod = F.matmul32(a, b.T)
        c = C.f32(M * N).reshape(M, N)
        c[...] = c + prod if accumulate else prod

    @reference(MATMUL_TN[precision])
    def _tn(launch, C, A, B, R, M, N, r_chunk):
        R, M, N, chunk = int(R), int(M), int(N), int(r_chunk)
        splits = launch.grid[2]
        a = _operand(A.f32(R * M).reshape(R, M), precision)
        b = _operand(B.f32(R * N).reshape(R, N), precision)
        c = C.f32(splits * M * N).reshape(splits, M, N)
        for z in range(splits):
            rows = slice(z * chunk, min(R, (z + 1) * chunk))
            c[z] = F.matmul32(a[rows].T, b[rows])

    return _linear, _nt, _tn


_F32_REFS = _register_linear("f32")
_TF32_REFS = _register_linear("tf32")
for _spec, _fn in zip((LINEAR_FWD_T32, MATMUL_NT_T32, MATMUL_TN_T32), _F32_REFS):
    reference(_spec)(_fn)  # the tiling does not change the result
for _spec in SKINNY_KERNELS.values():
    reference(_spec)(_F32_REFS[0])
for _spec, _fn in zip(TF32_T32.values(), _TF32_REFS):
    reference(_spec)(_fn)


def _register_group(single, group):
    @reference(group)
    def _linear_group(launch, layers):
        for row in layers.i64(launch.grid[2] * len(LINEAR_GROUP_FIELDS)).reshape(-1, len(LINEAR_GROUP_FIELDS)):
            f = dict(zip(LINEAR_GROUP_FIELDS, (int(v) for v in row)))
            single(launch, *(launch.resolve(f[k]) for k in ("Y", "X", "W", "bias")), f["M"], f["K"], f["N"], f["act"])


for _name, _group in LINEAR_GROUP.items():  # each group form runs its linear kernel's reference per layer
    _register_group((_TF32_REFS if "tf32" in _name else _F32_REFS)[0], _group)


def _tn_ones(launch, C, A, B, R, M, N, r_chunk):
    _tn_ones_splits(C, A, B, R, M, N, r_chunk, launch.grid[2])


def _tn_ones_splits(C, A, B, R, M, N, r_chunk, splits):
    R, M, N, chunk = int(R), int(M), int(N), int(r_chunk)
    a = np.concatenate([A.f32(R * M).reshape(R, M), np.ones((R, 1), np.float32)], axis=1)
    b = B.f32(R * N).reshape(R, N)
    c = C.f32(splits * (M + 1) * N).reshape(splits, M + 1, N)
    for z in range(splits):
        rows = slice(z * chunk, min(R, (z + 1) * chunk))
        c[z] = F.matmul32(a[rows].T, b[rows])


for _spec in MATMUL_TN_ONES.values():
    reference(_spec)(_tn_ones)


@reference(MATMUL_TN_ONES_GROUP)
def _tn_ones_group(launch, passes, n_passes):
    rows = passes.i64(int(n_passes) * len(TN_GROUP_FIELDS)).reshape(-1, len(TN_GROUP_FIELDS))
    z = TN_GROUP_FIELDS.index("z_begin")
    for row, end in zip(rows, [*rows[1:, z], launch.grid[2]]):
        f = dict(zip(TN_GROUP_FIELDS, (int(v) for v in row)))
        _tn_ones_splits(*(launch.resolve(f[k]) for k in ("C", "A", "B")), f["R"], f["M"], f["N"], f["r_chunk"],
                        int(end) - f["z_begin"])


@reference(REDUCE_GRAD_SPLITS)
def _reduce_grad_splits(launch, grad, partials, table, n_entries, total):
    g, parts = grad.f32(), partials.f32()
    for row in table.i64(int(n_entries) * len(GRAD_SPLIT_FIELDS)).reshape(-1, len(GRAD_SPLIT_FIELDS)):
        f = dict(zip(GRAD_SPLIT_FIELDS, (int(x) for x in row)))
        size, n_main = f["size"], f["n_main"]
        p = parts[f["partials"]:f["partials"] + f["splits"] * size].reshape(f["splits"], size)
        s = p[0].copy()
        for z in range(1, f["splits"]):
            s += p[z]
        g[f["out"]:f["out"] + n_main] = s[:n_main]
        g[f["tail"]:f["tail"] + size - n_main] = s[n_main:]


@reference(COLUMN_SUM_PARTIAL)
def _column_sum_partial(launch, partials, X, R, N, r_chunk):
    R, N, chunk = int(R), int(N), int(r_chunk)
    splits = launch.grid[1]
    x = X.f32(R * N).reshape(R, N)
    out = partials.f32(splits * N).reshape(splits, N)
    for z in range(splits):
        out[z] = x[z * chunk:min(R, (z + 1) * chunk)].sum(axis=0, dtype=np.float64)


@reference(ACT_BWD)
def _act_bwd(launch, dx, dy, y, n, act):
    n = int(n)
    dx.f32(n)[:] = dy.f32(n) * F.activate_grad(y.f32(n), int(act))


class SplitPass:
    """One layer's split dW + db pass, planned once its GradPartials has placed the partials (`finish`);
    `name` says whose gradient it is (a profile's row). A pass run by another's group launch has no plan."""

    def __init__(self, name: str, splits: int):
        self.name, self.splits, self.plans, self.planned = name, splits, [], False

    def launch(self, stream):
        if not self.planned:
            raise RuntimeError(f"split pass {self.name}: GradPartials.finish() has not placed its partials yet")
        for p in self.plans:
            p.launch(stream)


class GradPartials:
    """The split dW + db passes of a backward: their partials side by side in one workspace, added into
    the flat gradient buffer by one launch (reduce_grad_splits) after the last pass.

    A layer's pass is registered with `add` while the model is built, before the workspace's size is
    known: it gets a SplitPass, planned by `finish`, which allocates the workspace and the table
    (every layer built, before any capture). The object is then a step entry (`plans`, `launch`): the
    reduction, to run once the backward's last pass has run and before anything reads the gradients.
    """

    def __init__(self, rt, grad, name: str = "grad_splits"):
        self.rt, self.grad, self.name = rt, grad, name
        self.rows: list[tuple[int, ...]] = []  # GRAD_SPLIT_FIELDS per pass
        self._passes: list[tuple] = []  # (pass, partials offset, build, together)
        self.total = 0  # elements reduced
        self.size = 0   # floats of partials
        self.plans = None

    def add(self, name: str, splits: int, size: int, n_main: int, out: int, tail: int, build,
            together=None) -> SplitPass:
        """A pass writing [splits][size] partials; `build(partials)` makes its plan once they have a place.
        The sum of element k < n_main goes to grad[out + k], of the others to grad[tail + k - n_main].
        `together` = (key, (A, dY, R, M, N, r_chunk)) for a matmul_tn_ones pass: the passes sharing a key
        run as one group launch (plan_tn_ones_group) where the first of them stands in the step, so every
        member's dY must be ready there; each keeps its split, so its bits."""
        if self.plans is not None:
            raise RuntimeError(f"{self.name}: a split pass added after finish()")
        if len(self.rows) == GRAD_SPLITS_MAX:
            raise ValueError(f"{self.name}: reduce_grad_splits takes at most {GRAD_SPLITS_MAX} passes")
        entry = SplitPass(name, splits)
        self.rows.append((self.total, size, splits, self.size, n_main, out, tail))
        self._passes.append((entry, self.size, build, together))
        self.total += size
        self.size += splits * size
        return entry

    def finish(self) -> GradPartials:
        """Allocate the workspace and the table, plan every pass and the reduction (once)."""
        if self.plans is None:
            self.plans = []
            if self.rows:
                rt = self.rt
                self.partials = rt.device_array(self.size, np.float32, f"{self.name}_partials")
                self.table = rt.device_array((len(self.rows), len(GRAD_SPLIT_FIELDS)), np.int64,
                                             f"{self.name}_table")
                self.table.upload(np.array(self.rows, np.int64))
                groups: dict[str, list] = {}
                for entry, offset, build, together in self._passes:
                    if together is None:
                        entry.plans, entry.planned = [build(self.partials.at(offset))], True
                    else:
                        groups.setdefault(together[0], []).append((entry, offset, build, together[1]))
                for key, members in groups.items():
                    first = members[0][0]
                    if len(members) == 1:
                        first.plans = [members[0][2](self.partials.at(members[0][1]))]
                    else:
                        first.plans = [plan_tn_ones_group(rt, [(self.partials.at(offset), *args)
                                                               for _, offset, _, args in members], key)]
                    for entry, *_ in members:
                        entry.planned = True
                grid = max(1, min(-(-self.total // REDUCE_BLOCK), MAX_BLOCKS))
                self.plans = [rt.plan(REDUCE_GRAD_SPLITS, grid, REDUCE_BLOCK, dict(
                    grad=self.grad, partials=self.partials, table=self.table, n_entries=len(self.rows),
                    total=self.total))]
        return self

    def launch(self, stream):
        if self.plans is None:
            raise RuntimeError(f"{self.name}: GradPartials.finish() was not called")
        for p in self.plans:
            p.launch(stream)


def plan_row_split(rt, partials: GradPartials, out: int, B, R: int, N: int, A=None, M: int = 1,
                   precision: str = "f32", name: str = "dW") -> SplitPass:
    """dW = A^T . B [M, N] (matmul_tn, FP32 or TF32) or, without A, db = the column sums of B [N]
    (column_sum_partial), over R rows split for parallelism (`row_split`); the splits are added in
    split order by `partials`' reduction into grad[out:]. (FP32 layers take dW and db in one pass
    instead: `plan_dw_db`.)"""
    if A is not None:
        spec, tile, threads = gemm_kernel("tn", M, N, precision)
        grid = gemm_grid(M, N, 1, tile)
        splits, chunk = row_split(R, max(grid[0] * grid[1] * threads // GEMM_THREADS, 1))
        build = lambda C: rt.plan(spec, gemm_grid(M, N, splits, tile), threads,  # noqa: E731
                                  dict(C=C, A=A, B=B, R=R, M=M, N=N, r_chunk=chunk))
    else:
        M = 1  # db: one row of column sums
        splits, chunk = row_split(R, -(-N // 32))
        build = lambda C: rt.plan(COLUMN_SUM_PARTIAL, (-(-N // 32), splits), (32, 8),  # noqa: E731
                                  dict(partials=C, X=B, R=R, N=N, r_chunk=chunk))
    return partials.add(name, splits, M * N, M * N, out, out, build)


def plan_dw_db(rt, partials: GradPartials, A, dY, R: int, M: int, N: int, out: int, tail: int,
               name: str = "dW", together: str | None = None) -> SplitPass:
    """dW = A^T dY [M, N] and db = the column sums of dY [N] over R rows in one pass: matmul_tn_ones
    gives A a column of ones, so each split's partial is (M+1) x N with the column sums last; the
    splits are added by `partials`' reduction into grad[out:], grad[tail:]. FP32 only. Passes with the
    same `together` key run as one launch (GradPartials.add)."""
    grid64 = gemm_grid(M + 1, N)
    # 64x64 tiles (less staging per product) when splitting the rows alone fills the GPU
    tile = TILE if grid64[0] * grid64[1] * max(1, R // 64) >= FILL_BLOCKS else f32_tile(M + 1, N, "tn")
    threads = GEMM_THREADS if tile == TILE else SMALL_THREADS
    grid = gemm_grid(M + 1, N, 1, tile)
    splits, chunk = row_split(R, grid[0] * grid[1] * threads // 32, SPLIT_TARGET_WARPS)  # warps per split
    return partials.add(name, splits, (M + 1) * N, M * N, out, tail, lambda C: rt.plan(
        MATMUL_TN_ONES[tile], gemm_grid(M + 1, N, splits, tile), threads,
        dict(C=C, A=A, B=dY, R=R, M=M, N=N, r_chunk=chunk)),
        together=(together, (A, dY, R, M, N, chunk)) if together else None)


def plan_tn_ones_group(rt, passes, name: str = "dw_db_group"):
    """The matmul_tn_ones passes (C, A, dY, R, M, N, r_chunk) in one launch of 32x32 tiles, each pass with
    its own split of the rows (so each partial has the bits of its own launch, whatever the tiling); the
    table is written here (before any capture) and the plan keeps the passes' buffers alive."""
    pointers = [[pointer_of(a, MATMUL_TN_ONES_GROUP, 0) for a in p[:3]] for p in passes]
    rows, z = [], 0
    for ptrs, (_, _, _, R, M, N, chunk) in zip(pointers, passes):
        rows.append([p.addr for p in ptrs] + [R, M, N, chunk, z])
        z += -(-R // chunk)
    table = rt.device_array((len(rows), len(TN_GROUP_FIELDS)), np.int64, f"{name}_passes")
    table.upload(np.array(rows, np.int64))
    grid = (max(-(-p[5] // SMALL_TILE) for p in passes), max(-(-(p[4] + 1) // SMALL_TILE) for p in passes), z)
    plan = rt.plan(MATMUL_TN_ONES_GROUP, grid, SMALL_THREADS, dict(passes=table, n_passes=len(rows)))
    plan.layer_buffers = (table, pointers)  # the table holds bare addresses: keep what they point into alive
    return plan


def plan_linear(rt, Y, X, W, bias, M: int, K: int, N: int, act: int = ACT_IDENTITY, precision: str = "f32"):
    spec, tile, threads = gemm_kernel("linear", M, N, precision)
    return rt.plan(spec, gemm_grid(M, N, 1, tile), threads, dict(Y=Y, X=X, W=W, bias=bias, M=M, K=K, N=N, act=act))


def plan_linear_group(rt, layers, precision: str = "f32", name: str = "linear_group"):
    """The forwards of independent layers in one launch: `layers` are (Y, X, W, bias, M, K, N, act) as
    plan_linear takes them, all taking the same kernel (`gemm_kernel`); each output has the bits that
    plan_linear gives it. The table of layers is written here (before any capture); the plan keeps
    the layers' buffers alive."""
    kernels = {gemm_kernel("linear", M, N, precision) for (_, _, _, _, M, _, N, _) in layers}
    if len(kernels) != 1:
        raise ValueError(f"{name}: the layers take different kernels ({', '.join(sorted(k[0].name for k in kernels))});"
                         " group only layers of one tiling")
    spec, tile, threads = kernels.pop()
    pointers = [[pointer_of(a, LINEAR_GROUP[spec.name], 0) for a in layer[:4]] for layer in layers]
    table = rt.device_array((len(layers), len(LINEAR_GROUP_FIELDS)), np.int64, f"{name}_layers")
    table.upload(np.array([[p.addr for p in ptrs] + [int(v) for v in layer[4:]]
                           for ptrs, layer in zip(pointers, layers)], np.int64))
    grids = [gemm_grid(int(layer[4]), int(layer[6]), 1, tile) for layer in layers]
    grid = (max(g[0] for g in grids), max(g[1] for g in grids), len(layers))
    plan = rt.plan(LINEAR_GROUP[spec.name], grid, threads, dict(layers=table))
    plan.layer_buffers = (table, pointers)  # the table holds bare addresses: keep what they point into alive
    return plan


def plan_matmul_nt(rt, C, A, B, M: int, K: int, N: int, accumulate: bool = False, precision: str = "f32"):
    spec, tile, threads = gemm_kernel("nt", M, N, precision)
    return rt.plan(spec, gemm_grid(M, N, 1, tile), threads,
                   dict(C=C, A=A, B=B, M=M, K=K, N=N, accumulate=int(accumulate)))


def plan_act_bwd(rt, dx, dy, y, n: int, act: int):
    return rt.plan(ACT_BWD, elementwise_grid(n), ELEMENTWISE_BLOCK, dict(dx=dx, dy=dy, y=y, n=n, act=act))
