"""The matmul ladder, its tile configurations and the TF32 rungs (src/matmul*.cu)."""

from __future__ import annotations

from ctypes import c_char_p, c_int
from typing import Any

from .loader import MT_OK, MtTensor, declare, C, check, _op_id

# The functions of src/minitensor.h that these wrappers call: name -> (restype, argtypes).
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "mt_matmul": (c_int, [MtTensor, MtTensor, MtTensor, c_int]),
    "mt_matmul_config_count": (c_int, []),
    "mt_matmul_config_name": (c_char_p, [c_int]),
    "mt_matmul_with_config": (c_int, [MtTensor, MtTensor, MtTensor, c_int, c_int]),
    "mt_matmul_tf32": (c_int, [MtTensor, MtTensor, MtTensor]),
    "mt_matmul_tf32_rung": (c_int, [MtTensor, MtTensor, MtTensor, c_int]),
    "mt_matmul_tf32_tile_count": (c_int, []),
    "mt_matmul_tf32_tile_name": (c_char_p, [c_int]),
    "mt_matmul_tf32_tile": (c_int, [MtTensor, MtTensor, MtTensor, c_int]),
    "mt_matmul_epilogue": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, c_int, c_int,
                                   c_int]),
    "mt_matmul_epilogue_config_count": (c_int, []),
    "mt_matmul_tf32_epilogue": (c_int, [MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, MtTensor, c_int,
                                        c_int]),
}
declare(SIGNATURES)


def matmul(out: Any, a: Any, b: Any, algo: str = "default", config: int = -1) -> None:
    """out = a @ b over the last two dims, batch dims broadcast (mt_matmul_with_config).

    config picks a tile configuration of a tunable rung (0 ..
    matmul_config_count() - 1: warptile's, then pipelined's; for algo
    "default" or the configuration's own rung); -1 lets the library choose
    from the shape.
    """
    # x._desc, the descriptor when x has built it already (most operands
    # have): the descriptor() call only where it has not.
    status = C.mt_matmul_with_config(out._desc or out.descriptor(), a._desc or a.descriptor(),
                                     b._desc or b.descriptor(), _op_id("matmul", algo), config)
    if status != MT_OK:
        check(status, "mt_matmul")


# The TF32 rungs by name (src/matmul_tf32.h's MT_TF32_SIMPLE, MT_TF32_PIPELINED,
# MT_TF32_MMA, MT_TF32_WGMMA, MT_TF32_TMA): "tf32" is the library's TF32 product
# (mt_matmul_tf32: wgmma, fed by TMA where it reads the operands, where the
# GPU, the layout and the size suit, else mma.sync; -1 here), the others each
# rung by its own name, for comparison.
TF32_RUNGS = {"tf32": -1, "tf32_simple": 0, "tf32_pipelined": 1, "tf32_mma": 2, "tf32_wgmma": 3, "tf32_tma": 4}


def matmul_tf32(out: Any, a: Any, b: Any, rung: str = "tf32") -> None:
    """out = a @ b on tensor cores, float32 operands as TF32 (mt_matmul_tf32 for
    "tf32", else mt_matmul_tf32_rung; rung is "tf32" or a key of TF32_RUNGS)."""
    if rung == "tf32":
        check(C.mt_matmul_tf32(out.descriptor(), a.descriptor(), b.descriptor()), "mt_matmul_tf32")
        return
    check(C.mt_matmul_tf32_rung(out.descriptor(), a.descriptor(), b.descriptor(), TF32_RUNGS[rung]),
          "mt_matmul_tf32")


def matmul_tf32_tile_names() -> tuple[str, ...]:
    """The tile variants of the mma.sync TF32 rung, in the library's numbering."""
    return tuple(C.mt_matmul_tf32_tile_name(i).decode() for i in range(int(C.mt_matmul_tf32_tile_count())))


def matmul_tf32_tile(out: Any, a: Any, b: Any, tile: int) -> None:
    """out = a @ b on the mma.sync TF32 rung with tile variant `tile` (an index into
    matmul_tf32_tile_names(), or -1: the library's choice), for benchmarks."""
    check(C.mt_matmul_tf32_tile(out.descriptor(), a.descriptor(), b.descriptor(), tile), "mt_matmul_tf32_tile")


def matmul_config_count() -> int:
    """How many tile configurations the tunable matmul rungs have (warptile's and pipelined's)."""
    return int(C.mt_matmul_config_count())


def matmul_config_name(config: int) -> str:
    """A readable name of one configuration ("128x128x16 warp 64x32 ...")."""
    raw = C.mt_matmul_config_name(config)
    if raw is None:
        raise ValueError(f"no matmul config {config} (there are {matmul_config_count()})")
    return raw.decode()


# mt_matmul_epilogue's flags (src/minitensor.h): which of bias, residual and pre are there.
EPILOGUE_BIAS = 1
EPILOGUE_RESIDUAL = 2
EPILOGUE_PRE = 4


def matmul_epilogue_config_count() -> int:
    """How many tile configurations the fused epilogue takes: all of matmul's,
    warptile's and pipelined's (mt_matmul_epilogue_config_count)."""
    return int(C.mt_matmul_epilogue_config_count())


def matmul_epilogue(out: Any, a: Any, b: Any, bias: Any = None, residual: Any = None, pre: Any = None,
                    act: str = "none", config: int = -1, tf32: bool = False) -> None:
    """out = act(a @ b + bias) + residual in one kernel (mt_matmul_epilogue); pre, if
    given, receives a @ b + bias before the activation. act is a name of
    op_names("epilogue_act"). An absent bias, residual or pre is not read
    (out's descriptor stands in for it). config: a tile configuration of matmul's
    (below matmul_epilogue_config_count()), or -1 for the library's choice.
    tf32: the product on the TF32 tensor-core rung instead (mt_matmul_tf32_epilogue,
    float32 only; it picks its own tile, so config must be -1)."""
    flags = ((EPILOGUE_BIAS if bias is not None else 0) | (EPILOGUE_RESIDUAL if residual is not None else 0)
             | (EPILOGUE_PRE if pre is not None else 0))
    out_d = out.descriptor()
    sides = (out_d if bias is None else bias.descriptor(), out_d if residual is None else residual.descriptor(),
             out_d if pre is None else pre.descriptor())
    if tf32:
        if config != -1:
            raise ValueError(f"matmul_epilogue(): the TF32 rung picks its own tile; config must be -1, got {config}")
        check(C.mt_matmul_tf32_epilogue(out_d, a.descriptor(), b.descriptor(), *sides,
                                        _op_id("epilogue_act", act), flags),
              "mt_matmul_tf32_epilogue")
        return
    check(C.mt_matmul_epilogue(out_d, a.descriptor(), b.descriptor(), *sides, _op_id("epilogue_act", act), flags,
                               int(config)),
          "mt_matmul_epilogue")
