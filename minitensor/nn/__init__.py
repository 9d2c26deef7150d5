"""minitensor.nn: layers, the Module container, and nn.functional (as in torch.nn).

    import minitensor as mt
    from minitensor import nn
    import minitensor.nn.functional as F

    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    loss = F.cross_entropy(model(x), targets)
    loss.backward()
    model.save("model.npz")                 # and model.load("model.npz")
"""

from . import functional, utils  # noqa: F401 - nn.utils.clip_grad_norm_, as torch
from .batchnorm import BatchNorm1d, BatchNorm2d
from .activation import ELU, Hardtanh, LeakyReLU, SiLU
from .conv import AdaptiveAvgPool2d, AvgPool2d, Conv1d, Conv2d, MaxPool2d
from .modules import (
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    GELU,
    IncompatibleKeys,
    LayerNorm,
    Linear,
    Module,
    MSELoss,
    ReLU,
    Sequential,
    Sigmoid,
    Tanh,
)
from .parameter import Parameter
from .transformer import MultiheadAttention, TransformerEncoderLayer

__all__ = [
    "AdaptiveAvgPool2d",
    "AvgPool2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv1d",
    "Conv2d",
    "CrossEntropyLoss",
    "Dropout",
    "ELU",
    "Embedding",
    "Flatten",
    "GELU",
    "Hardtanh",
    "IncompatibleKeys",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "MaxPool2d",
    "Module",
    "MultiheadAttention",
    "MSELoss",
    "Parameter",
    "ReLU",
    "Sequential",
    "Sigmoid",
    "SiLU",
    "Tanh",
    "TransformerEncoderLayer",
    "functional",
    "utils",
]
